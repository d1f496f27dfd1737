"""The frameworks a NIR file is exported for (``plif export --for``): the time-step each importer
steps with and the nodes it cannot run as plif does, checked before anything is written.

What each importer assumes, read from its source (Norse 1.1.0, snnTorch 1.0.0):

- Norse: ``norse.torch.from_nir(graph, dt=0.001)``: ``dt`` is an argument, 1e-3 by default.  It
  has no ``AvgPool2d`` (the node is skipped, the module cannot be built).
- snnTorch: ``snntorch.import_nir.import_from_nir(graph)`` hard-codes ``dt = 1e-4`` for LIF and
  keeps one threshold scale ``dt/τ`` per layer (the first neuron's); it builds ``IF`` as a leaky
  neuron (β = 0.9, subtractive reset) and refuses ``v_leak != 0``.
- Sinabs 3.1.3: ``sinabs.from_nir(graph, batch_size)`` has no ``dt`` (τ in time-steps, ``r``
  ignored: ``dt = 1``), no ``AvgPool2d`` and only ``v_leak = 0``; its neurons differ from plif's
  unless set as :func:`plif.deploy.nir_sinabs.sinabs_from_nir` sets them.
- generic: ``dt = 1`` (τ in time-steps), for importers that read ``metadata["dt"]`` (plif's own).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Target", "TARGETS", "target_dt", "check_target"]


@dataclass(frozen=True)
class Target:
    name: str
    dt: float
    dt_fixed: bool  # the importer cannot be told another dt
    load: str  # how a user loads the file there (printed by plif export)


TARGETS = {
    "norse": Target("norse", 1e-3, False, "norse.torch.from_nir(nir.read(FILE), dt={dt!r})"),
    "snntorch": Target("snntorch", 1e-4, True, "snntorch.import_nir.import_from_nir(nir.read(FILE))"),
    "sinabs": Target("sinabs", 1.0, True, "plif.deploy.nir_sinabs.sinabs_from_nir(nir.read(FILE), batch_size=B) "
                                          "(sinabs.from_nir alone builds other neurons: docs/deployment.md)"),
    "generic": Target("generic", 1.0, False, "plif.deploy.read_nir(FILE) (dt = {dt!r} in metadata['dt'])"),
}


def target_dt(target: str, dt: float | None = None) -> float:
    """The ``dt`` to export for ``target``: ``dt`` if given (refused where the importer fixes its own)."""
    if target not in TARGETS:
        raise ValueError(f"unknown NIR target {target!r}; valid: {', '.join(TARGETS)}")
    t = TARGETS[target]
    if dt is None:
        return t.dt
    if t.dt_fixed and float(dt) != t.dt:
        raise ValueError(f"{target}'s importer always steps with dt = {t.dt:g}; --dt {dt:g} would change "
                         f"every leak there (leave --dt out, or export --for generic/norse)")
    return float(dt)


def check_target(graph, target: str) -> None:
    """Refuse (``ValueError`` naming the node) what ``target``'s importer would run differently from plif."""
    for name, node in graph.nodes.items():
        kind = type(node).__name__
        if target in ("norse", "sinabs") and kind == "AvgPool2d":
            raise ValueError(f"node {name!r}: {target} has no AvgPool2d (only 2x2/4x4 average pools before a "
                             f"conv/linear are written as SumPool2d); export --for snntorch or generic")
        if target == "norse" and kind in ("LIF", "IF") and np.any(np.asarray(node.v_reset) != 0):
            raise ValueError(f"node {name!r}: Norse's importer ignores v_reset and resets to 0")
        if target == "snntorch" and kind == "IF":
            raise ValueError(f"node {name!r}: snnTorch 1.0 imports IF as a leaky neuron with subtractive reset; "
                             f"export --for norse or generic")
        if target in ("snntorch", "sinabs") and kind == "LIF" and np.any(np.asarray(node.v_leak) != 0):
            raise ValueError(f"node {name!r}: {target} supports only v_leak = 0 (plif writes v_leak = V_reset)")
        if target == "snntorch" and kind == "LIF":
            rate = np.asarray(node.r, dtype=np.float64) / np.asarray(node.tau, dtype=np.float64)
            if np.unique(rate).size != 1:
                raise ValueError(f"node {name!r}: snnTorch 1.0 keeps one dt/tau per layer, this layer has "
                                 f"{np.unique(rate).size} (per-channel tau); export --for norse or generic")
