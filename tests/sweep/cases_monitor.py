"""A SpikingJelly user's habits on plif (issues 53.7, 56.2, 56.5): their monitor idioms, their neuron
argument names, the way back to SpikingJelly and an unconverted model given to ``plif train --model``.

Each Python case is ``python -c`` in a fresh process, as in :mod:`.cases_api`: a ``TypeError`` /
``ValueError`` is printed as one ``python: error:`` line (exit 2), anything else reaches the user as a
traceback; ``check`` finds the words the refusal must hold (plif's spelling).  The cases that build a
SpikingJelly model are skipped where SpikingJelly is not installed.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

from .case import Case, SkipCase
from .cases_options import no_stub

AREA = "monitor"

PRELUDE = """
import sys
import torch
from torch import nn
import plif
from plif import IF, LIF, PLIF
from plif.monitor import *
from plif.monitor import AttributeMonitor, GradInputMonitor
net = plif.build_network("c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF", (1, 8, 8), 2)
try:
{call}
except (TypeError, ValueError) as e:
    print(f"python: error: {{type(e).__name__}}: {{e}}", file=sys.stderr)
    sys.exit(2)
"""

SJ_MODEL = ("    from spikingjelly.activation_based import functional, layer, neuron\n"
            "    sj = nn.Sequential(layer.Linear(4, 8), neuron.LIFNode())\n"
            "    functional.set_step_mode(sj, 'm')\n")

# name -> (the call, indented; what the refusal says; needs SpikingJelly)
CALLS = {
    "rates-node-class": ("    FiringRateMonitor(net, PLIF)", "SpikingJelly's instance argument", False),
    "rates-none": ("    FiringRateMonitor(None)", "takes the model to watch (a torch.nn.Module)", False),
    "rates-a-class-as-model": ("    FiringRateMonitor(PLIF)", "got the class PLIF", False),
    "rates-no-plif-neuron": ("    FiringRateMonitor(nn.Sequential(nn.Linear(2, 2)))", "holds no plif neuron", False),
    "rates-all-reduce-positional": ("    FiringRateMonitor(net, lambda t: t)", "keywords only (layers=, all_reduce=)",
                                    False),
    "rates-all-reduce-class": ("    FiringRateMonitor(net, all_reduce=PLIF)", "all_reduce= takes a function", False),
    "output-node-class": ("    OutputMonitor(net, PLIF)", "plif's OutputMonitor(model) watches every plif neuron", False),
    "input-instance-keyword": ("    InputMonitor(net, instance=PLIF)", "SpikingJelly's instance argument", False),
    "output-function-on-output": ("    OutputMonitor(net, function_on_output=lambda s: s.mean())", "monitor[name]",
                                  False),
    "grad-output-node-tuple": ("    GradOutputMonitor(net, (PLIF, LIF))", "SpikingJelly's instance argument", False),
    "attribute-monitor-v": ("    AttributeMonitor('v', False, net, PLIF)", "PotentialMonitor(model)", False),
    "grad-input-monitor": ("    GradInputMonitor(net, PLIF)", "GradOutputMonitor(model", False),
    "potential-on-a-conv": ("    PotentialMonitor(net, layers=['layers.0'])", "not a plif neuron", False),
    "layers-unknown": ("    OutputMonitor(net, layers=['conv1'])", "'conv1' is not a module of the model", False),
    "layers-a-class": ("    OutputMonitor(net, layers=PLIF)", "layers= takes qualified module names", False),
    "neuron-init-tau": ("    PLIF(init_tau=2.0)", "PLIF takes tau0=", False),
    "neuron-surrogate-function": ("    LIF(surrogate_function=None)", "surrogate= (a name", False),
    "neuron-step-mode": ("    IF(step_mode='m')", "multi-step", False),
    "neuron-decay-input": ("    PLIF(decay_input=False)", "False has no counterpart", False),
    "neuron-store-v-seq": ("    LIF(store_v_seq=True)", "PotentialMonitor", False),
    "to-spikingjelly-none": ("    plif.to_spikingjelly(net, None)", "sj_model takes a torch.nn.Module", False),
    "rates-unconverted-spikingjelly": (SJ_MODEL + "    FiringRateMonitor(sj)", "plif.from_spikingjelly(model)", True),
    "to-spikingjelly-other-model": (SJ_MODEL + "    plif.to_spikingjelly(net, sj)", "is not plif.from_spikingjelly",
                                    True),
}


def _needs_spikingjelly() -> None:
    if importlib.util.find_spec("spikingjelly") is None:
        raise SkipCase("SpikingJelly is not installed")


def _case(name: str, call: str, says: str, needs_sj: bool) -> Case:
    def run(env):
        if needs_sj:
            _needs_spikingjelly()
        return env.python(PRELUDE.format(call=call))

    def check(tmp, r):
        return None if says in r.stderr + r.stdout else f"the output does not say {says!r}"

    return Case(f"monitor-{name}", AREA, run=run, check=check)


FACTORY = """
from spikingjelly.activation_based import functional, layer, neuron
import torch


def make(num_classes):
    net = torch.nn.Sequential(layer.Flatten(), layer.Linear(784, num_classes), neuron.LIFNode())
    functional.set_step_mode(net, "m")
    return net
"""


def _unconverted_model_case() -> Case:
    """``plif train --model`` with a factory returning SpikingJelly's own model (issue 56.5): it died in
    training with PyTorch's "backward through the graph a second time"."""
    argv = ["train", "--data-dir", "{fmnist}", "--model", "{tmp}/sj_model.py:make", "--T", "2",
            "--max-train-samples", "64", "--max-test-samples", "64", "--epochs", "1", "--batch-size", "32",
            "--device", "cpu", "--out", "{tmp}/run"]

    def run(env):
        _needs_spikingjelly()
        (env.tmp / "sj_model.py").write_text(FACTORY)
        return env.plif(*[env.fill(a) for a in argv])

    def check(tmp: Path, r):
        if "return plif.from_spikingjelly(model)" not in r.stderr:
            return "the refusal does not say to call plif.from_spikingjelly"
        return no_stub(tmp, r)

    return Case("monitor-model-unconverted-spikingjelly", AREA, run=run, check=check, timeout=300.0)


CASES = [_case(name, *c) for name, c in CALLS.items()] + [_unconverted_model_case()]
