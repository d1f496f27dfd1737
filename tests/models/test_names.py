"""One owner of a model's neurons and their names (plif.models.names): qualified module names for every
network; the names runs before stored for a notation network (2_PLIF) still read."""
import json

import pytest
import torch
from torch import nn

from plif import PLIF, LIF, build_network
from plif.layers import TimeFolded
from plif.models.names import layer_taus, neurons, stored_name, stored_names, tau_names
from plif.monitor import FiringRateMonitor


def test_every_network_names_its_neurons_by_qualified_module_name():
    net = build_network("c4k3s1-BN-PLIF-MPk2s2-FC10-LIF-FC10-PLIF", (1, 8, 8), T=2)
    assert list(neurons(net)) == ["layers.2", "layers.6", "layers.8"]
    assert tau_names(net) == ["layers.2", "layers.8"] and layer_taus(net) == net.taus()
    model = nn.Sequential(TimeFolded(nn.Linear(5, 7)), PLIF(), nn.Sequential(TimeFolded(nn.Linear(7, 3)), LIF()))
    assert list(neurons(model)) == ["1", "2.1"] and tau_names(model) == ["1"]


@pytest.mark.parametrize("old,new", [("2_PLIF", "layers.2"), ("17_LIF", "layers.17"), ("0_IF", "layers.0"),
                                     ("layers.2", "layers.2"), ("block.0.neuron", "block.0.neuron"),
                                     ("sn1", "sn1"), ("2_plif", "2_plif"), ("x_PLIF", "x_PLIF")])
def test_a_stored_name_reads_as_the_qualified_name(old, new):
    assert stored_name(old) == new


def test_a_run_folder_written_before_reads_its_rates_by_qualified_name(tmp_path):
    """metrics.jsonl of a notation run from before (54a87dd) named layers 2_PLIF; resumed now, its next rows
    name them layers.2: the report's reader gives one series."""
    from plif.experiments.runs import read_run

    (tmp_path / "config.json").write_text(json.dumps({"network": "c4k3s1-BN-PLIF-FC10-PLIF", "T": 2}))
    rows = [{"epoch": 1, "taus": [2.0, 2.0], "firing_rates": {"2_PLIF": 0.25, "4_PLIF": 0.5}},
            {"epoch": 2, "taus": [2.1, 1.9], "firing_rates": {"layers.2": 0.3, "layers.4": 0.4}}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read_run(tmp_path).firing_rates() == [{"layers.2": 0.25, "layers.4": 0.5}, {"layers.2": 0.3, "layers.4": 0.4}]
    assert stored_names({"sn1": 0.1}) == {"sn1": 0.1}  # a --model run's names are its modules' already


def test_a_monitor_takes_an_old_name_and_keeps_it():
    net = build_network("c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF", (1, 8, 8), T=2)
    with FiringRateMonitor(net, layers=["6_PLIF"]) as old, FiringRateMonitor(net, layers=["layers.6"]) as new:
        net(torch.rand(2, 1, 8, 8))
    assert list(old.rates()) == ["6_PLIF"] and list(new.rates()) == ["layers.6"]
    assert old.rates()["6_PLIF"] == new.rates()["layers.6"]
