"""What a monitor cannot watch is refused in one line naming plif's spelling (issues 53.7, 56.2):
SpikingJelly's ``Monitor(net, NodeClass)`` (the class bound to ``all_reduce`` before), no model, a
model without plif neurons (``{}`` silently before), an unconverted SpikingJelly model, SpikingJelly's
``AttributeMonitor`` / ``GradInputMonitor`` and ``function_on_output``."""
import pytest
import torch
from torch import nn

from plif import PLIF, build_network
from plif.layers import TimeFolded
from plif.monitor import (FiringRateMonitor, GradOutputMonitor, InputMonitor, OutputMonitor, PotentialMonitor,
                          spiking_layers)
from plif.monitor import AttributeMonitor, GradInputMonitor

MONITORS = [FiringRateMonitor, OutputMonitor, InputMonitor, GradOutputMonitor, PotentialMonitor]


def _net():
    return build_network("c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF", (1, 8, 8), T=2)


def _one_line(excinfo, *words):
    msg = str(excinfo.value)
    assert "\n" not in msg, msg
    for w in words:
        assert w in msg, msg


@pytest.mark.parametrize("monitor", MONITORS, ids=lambda m: m.__name__)
def test_a_node_class_after_the_model_is_spikingjellys_spelling(monitor):
    with pytest.raises(TypeError) as e:
        monitor(_net(), PLIF)
    _one_line(e, "SpikingJelly's instance argument", f"{monitor.__name__}(model)", "layers=")


@pytest.mark.parametrize("monitor", MONITORS, ids=lambda m: m.__name__)
@pytest.mark.parametrize("model", [None, PLIF, "net", 3])
def test_no_model(monitor, model):
    with pytest.raises(TypeError) as e:
        monitor(model)
    _one_line(e, "takes the model to watch (a torch.nn.Module)")


@pytest.mark.parametrize("monitor", MONITORS, ids=lambda m: m.__name__)
def test_a_model_without_plif_neurons_is_refused_not_empty(monitor):
    with pytest.raises(ValueError) as e:
        monitor(nn.Sequential(TimeFolded(nn.Linear(3, 4)), nn.ReLU()))
    _one_line(e, "holds no plif neuron (IF, LIF, PLIF)")


def test_rates_arguments_after_the_model_are_keywords():
    net = _net()
    with pytest.raises(TypeError) as e:
        FiringRateMonitor(net, lambda t: t)
    _one_line(e, "keywords only (layers=, all_reduce=)")
    with pytest.raises(TypeError) as e:
        FiringRateMonitor(net, all_reduce=PLIF)
    _one_line(e, "all_reduce= takes a function")
    with FiringRateMonitor(net, layers=["6_PLIF"]) as mon:
        net(torch.rand(2, 1, 8, 8))
    assert list(mon.rates()) == ["6_PLIF"]


@pytest.mark.parametrize("layers,error,says", [
    (PLIF, TypeError, "layers= takes qualified module names"),
    ([], ValueError, "layers= is empty"),
    (["nope"], ValueError, "'nope' is not a module of the model (its plif neurons: layers.2, layers.6"),
    (["9_PLIF"], ValueError, "'9_PLIF' is not a module of the model (its plif neurons: layers.2, layers.6"),
    ([0], TypeError, "layers= takes qualified module names"),
])
def test_bad_layers(layers, error, says):
    with pytest.raises(error) as e:
        OutputMonitor(_net(), layers=layers)
    _one_line(e, says)


def test_a_potential_or_a_rate_is_a_neurons_only():
    for monitor in (PotentialMonitor, FiringRateMonitor):
        with pytest.raises(ValueError) as e:
            monitor(_net(), layers=["layers.0"])
        _one_line(e, "'layers.0' is a TimeFolded, not a plif neuron")


def test_spikingjelly_only_names_and_arguments():
    net = _net()
    with pytest.raises(TypeError) as e:
        AttributeMonitor("v", False, net, PLIF)
    _one_line(e, "PotentialMonitor(model)")
    with pytest.raises(TypeError) as e:
        GradInputMonitor(net, PLIF)
    _one_line(e, "GradOutputMonitor(model")
    with pytest.raises(TypeError) as e:
        OutputMonitor(net, function_on_output=lambda x: x)
    _one_line(e, "SpikingJelly's", "monitor[name]")
    with pytest.raises(TypeError) as e:
        InputMonitor(net, instance=PLIF)
    _one_line(e, "SpikingJelly's instance argument")


def test_reading_a_monitor_never_opened_says_so():
    mon = OutputMonitor(_net())
    with pytest.raises(RuntimeError, match="records while open"):
        mon["2_PLIF"]
    with mon:
        pass
    assert mon["2_PLIF"] == []
    assert mon["layers.2"] is mon["2_PLIF"]  # the name runs before gave it reads
    with pytest.raises(KeyError, match="'x' is not watched; watched: layers.2, layers.6"):
        mon["x"]


def test_an_unconverted_spikingjelly_model_points_to_from_spikingjelly():
    from sj_testing import sj

    s = sj()
    model = nn.Sequential(s.layer.Linear(3, 4), s.neuron.LIFNode())
    assert spiking_layers(model) == {}
    for monitor in MONITORS:
        with pytest.raises(ValueError) as e:
            monitor(model)
        _one_line(e, "a SpikingJelly model (LIFNode at '1'", "plif.from_spikingjelly(model)")
