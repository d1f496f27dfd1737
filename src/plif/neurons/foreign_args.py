"""SpikingJelly's argument names on plif's neurons, refused with plif's spelling.

Never mapped silently: a name may mean something else here (SpikingJelly's ``surrogate_function`` is a
module, plif's ``surrogate`` a name), and a setting plif has no counterpart for (``decay_input=False``)
must not vanish.  ``v_threshold``, ``v_reset`` and ``detach_reset`` are the same in both and taken.
"""
from __future__ import annotations

import inspect

__all__ = ["SPIKINGJELLY_NAMES", "unknown_arguments"]

SPIKINGJELLY_NAMES: dict[str, str] = {
    "init_tau": "{tau}",
    "surrogate_function": "plif's is surrogate= (a name: 'atan', 'sigmoid', 'triangle', 'rect') and alpha=; "
                          "SpikingJelly's surrogate.ATan(alpha) is surrogate='atan', alpha=alpha",
    "step_mode": "plif's neurons are multi-step (x [T, B, ...]); .step(x_t, v) runs one step",
    "decay_input": "plif charges H = V + (X - (V - V_reset))/tau, SpikingJelly's decay_input=True; False has no "
                   "counterpart",
    "store_v_seq": "plif.monitor.PotentialMonitor(model) records V over every step",
}
"""SpikingJelly's neuron arguments plif spells otherwise (or has no counterpart for): what to write instead."""

_TAU = {"PLIF": "plif's PLIF takes tau0= (the initial time constant)", "LIF": "plif's LIF takes tau=",
        "IF": "IF has no time constant (LIF(tau=), PLIF(tau0=))"}


def _takes(cls: type) -> list[str]:
    names = []
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass.__module__ == "torch.nn.modules.module":
            continue
        names += [p.name for p in inspect.signature(init).parameters.values()
                  if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name not in names]
    return names


def unknown_arguments(cls: type, given: dict) -> TypeError:
    """The one-line ``TypeError`` for keyword arguments ``given`` that neuron class ``cls`` does not take:
    SpikingJelly's names (:data:`SPIKINGJELLY_NAMES`, and ``tau``/``tau0`` on the wrong class) with plif's
    spelling, any other with the names it takes."""
    layer, name = cls.__name__, next(iter(given))
    tau = _TAU.get(layer, "plif's PLIF takes tau0=, LIF tau=")
    if name in SPIKINGJELLY_NAMES:
        return TypeError(f"{layer}({name}=...) is SpikingJelly's argument; {SPIKINGJELLY_NAMES[name].format(tau=tau)}")
    if name in ("tau", "tau0"):
        return TypeError(f"{layer}({name}=...): {tau}")
    return TypeError(f"{layer} got an unexpected keyword argument {name!r}; it takes {', '.join(_takes(cls))}")
