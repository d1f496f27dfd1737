"""Facts about neuron layers that live in one place: the neuron names, the τ check, the backend check."""
import argparse
import re

import pytest
import torch

from plif.models import build_network, parse
from plif.neurons import IF, LIF, MAX_TAU, NEURONS, PLIF, check_tau, make_neuron, multi_step
from plif.neurons.dispatch import check_backend
from plif.train import TrainConfig
from plif.train.checks import NEURON_NAMES
from plif.train.config import resolve_config


def test_every_neuron_name_is_a_token_a_config_choice_and_a_spec_choice():
    from plif.cli.spec import register

    assert [t.args["name"] for t in parse("-".join(NEURONS))] == list(NEURONS)
    assert NEURON_NAMES == tuple(n.lower() for n in NEURONS)
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    spec = parser._subparsers._group_actions[0].choices["spec"]
    (neuron,) = [a for a in spec._actions if a.dest == "neuron"]
    assert list(neuron.choices) == list(NEURONS)
    assert all(isinstance(make_neuron(n.lower()), NEURONS[n]) for n in NEURONS)


TAU_MESSAGE = re.escape(f"must be greater than 1 and at most {MAX_TAU:g} time-steps")


@pytest.mark.parametrize("tau", [1.0, 0.5, float("nan"), float("inf"), 1e31, True])
def test_tau_is_checked_alike_by_layers_networks_and_the_training_config(tau):
    for name, make in [("LIF tau", lambda: LIF(tau=tau)), ("PLIF tau0", lambda: PLIF(tau0=tau)),
                       ("PLIF tau0", lambda: build_network("FC10-PLIF", (4,), 2, tau0=tau)),
                       ("--tau0", lambda: resolve_config(TrainConfig(tau0=tau, device="cpu")))]:
        if name == "--tau0" and (tau is True or tau != tau or tau == float("inf")):
            continue  # refused earlier by the config's own type and finiteness checks
        with pytest.raises(ValueError, match=f"{name} {TAU_MESSAGE}"):
            make()
    assert check_tau(MAX_TAU) == MAX_TAU and LIF(tau=1.5).tau == 1.5


def test_a_backend_is_refused_alike_everywhere():
    message = r"backend 'nope': unknown; available: auto, reference, bptt"
    for make in (lambda: multi_step(torch.zeros(2, 2), backend="nope"), lambda: PLIF(backend="nope"),
                 lambda: build_network("FC10-IF", (4,), 2).set_backend("nope"),
                 lambda: build_network("FC10-IF", (4,), 2, backend="nope")):
        with pytest.raises(ValueError, match=message):
            make()
    with pytest.raises(ValueError, match="--" + message):
        resolve_config(TrainConfig(backend="nope", device="cpu"))


def test_a_kernel_for_another_device_is_refused_before_the_run():
    with pytest.raises(ValueError, match="backend 'cpu': a cpu kernel, but this runs on cuda; use backend auto"):
        check_backend("cpu", "cuda")
    with pytest.raises(ValueError, match="--backend 'cpu': a cpu kernel, but this runs on cuda; use --backend auto"):
        resolve_config(TrainConfig(backend="cpu", device="cuda"))
    check_backend("cpu", "cpu")
    assert IF(backend="bptt").backend == "bptt"
