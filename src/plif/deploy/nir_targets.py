"""The frameworks a NIR file is exported for (``plif export --for``): the time-step each importer
steps with, the nodes it cannot run as plif does (checked before anything is written), and which
importers run a given file exactly (``plif export --check FILE``).

What each importer assumes, read from its source (Norse 1.1.0, snnTorch 1.0.0):

- Norse: ``norse.torch.from_nir(graph, dt=0.001)``: ``dt`` is an argument, 1e-3 by default; plif
  exports for that default where every trained ``k`` of the network has a float32 τ at 1e-3 (so
  ``norse.torch.from_nir(graph)`` as a user calls it runs it exactly: every zoo network at its
  initial τ, 89 % of learned ``k``), else for ``dt = 2**-10`` (about 1e-3), a power of two, at
  which every float32 ``k`` has a τ (and the file must be loaded with ``dt=2**-10``).  It has no ``AvgPool2d`` (the node is skipped, the
  module cannot be built).  It computes plif's float32 operations, except that it runs a BatchNorm
  node as a convolution, which can round once more than BatchNorm depending on the width, the frame
  size and the machine (:mod:`.nir_bn`): exact where every BN node is measured to round as BatchNorm
  on the machine that judges the file, else close.
- snnTorch: ``snntorch.import_nir.import_from_nir(graph)`` hard-codes ``dt = 1e-4`` for LIF and
  keeps one threshold scale ``dt/τ`` per layer (the first neuron's); it builds ``IF`` as a leaky
  neuron (β = 0.9, subtractive reset) and refuses ``v_leak != 0``.  It steps a rescaled potential:
  close, not exact.
- Sinabs 3.1.3: ``sinabs.from_nir(graph, batch_size)`` has no ``dt`` (τ in time-steps, ``r``
  ignored: ``dt = 1``), no ``AvgPool2d`` and only ``v_leak = 0``; its neurons differ from plif's
  unless set as :func:`plif.deploy.nir_sinabs.sinabs_from_nir` sets them, and then round
  differently: close, not exact.
- generic: ``dt = 1`` (τ in time-steps), for importers that read ``metadata["dt"]`` (plif's own).

Residual graphs (a node with several inputs runs on their sum), per importer:

- plif's: any feed-forward graph, a node's inputs added in edge order: exact.
- Norse and Sinabs (``nirtorch.load``): inputs summed, nodes run depth first from the input, so where
  two branches with layers meet (a downsampling shortcut) the join would read the later branch from
  the step before (:func:`depth_first_late`): their files hold a node of zeros that makes it wait
  (:mod:`.nir_order`), else they are refused; identity shortcuts run as they are.
- snnTorch (``nirtorch.nir_to_torch``): nodes in topological order, inputs added: runs them (close).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .nir_bn import bn_form, conv_channels_off
from .nir_edges import links

__all__ = ["Target", "TARGETS", "DEFAULT_TARGET", "ALL_TARGETS", "BN_MODES", "DEFAULT_BN", "target_dt", "target_path",
           "check_target", "graph_meta", "importer_report", "importer_summary", "IMPORTER_OF",
           "IMPORTERS", "Verdict", "verdicts", "bn_nodes", "depth_first_late"]

BN_MODES = ("exact", "fold")
DEFAULT_BN = "exact"  # BatchNorm as its own node, computing what the trained network computes


@dataclass(frozen=True)
class Target:
    name: str
    dt: float
    dt_fixed: bool  # the importer cannot be told another dt
    exact: bool  # it computes plif's float32 operations (given an exact BN and leak; Norse: BN nodes measured)
    load: str  # how a user loads the file there (printed by plif export)
    other_dt: str = ""  # what its importer does with a file for another dt (dt_fixed targets)
    importer_dt: float | None = None  # the dt its importer steps with when not given one

    def load_line(self, dt: float) -> str:
        """How to load a file for ``dt`` there (``FILE`` for the path): the importer's own default
        needs no ``dt`` argument."""
        if self.importer_dt is not None and dt == self.importer_dt:
            return self.load.replace(", dt={dt!r}", "") + f" (its default dt = {dt!r}, the file's)"
        return self.load.format(dt=dt)


TARGETS = {
    "norse": Target("norse", 2.0 ** -10, False, True, "norse.torch.from_nir(nir.read(FILE), dt={dt!r})",
                    importer_dt=1e-3),
    "snntorch": Target("snntorch", 1e-4, True, False, "snntorch.import_nir.import_from_nir(nir.read(FILE))",
                       "it reads no dt from the file and runs it with other leaks and thresholds without an error "
                       "(plif's default file, for Norse, gives all-zero outputs there)"),
    "sinabs": Target("sinabs", 1.0, True, False,
                     "plif.deploy.nir_sinabs.sinabs_from_nir(nir.read(FILE), batch_size=B) "
                     "(sinabs.from_nir alone builds other neurons: docs/deployment.md)",
                     "plif's sinabs_from_nir refuses it; sinabs.from_nir reads no dt and would leak differently"),
    "generic": Target("generic", 1.0, False, True, "plif.deploy.read_nir(FILE) (dt = {dt!r} in metadata['dt'])"),
}

# what plif export and plif.deploy.export_nir / to_nir write when no target is named
DEFAULT_TARGET = "norse"

# plif export --for all: one file per target, named by target_path
ALL_TARGETS = "all"


def target_path(path, target: str) -> Path:
    """The file ``plif export --nir PATH --for all`` writes for ``target``: ``model.nir`` ->
    ``model.norse.nir`` (the target before the suffix, ``.nir`` if ``PATH`` has none)."""
    path = Path(path)
    return path.with_name(f"{path.stem if path.suffix else path.name}.{target}{path.suffix or '.nir'}")


def graph_meta(graph, key: str, default=None):
    """``graph.metadata[key]`` (``default`` if absent), a string where HDF5 gave back bytes."""
    v = (graph.metadata or {}).get(key, default)
    return v.decode() if isinstance(v, bytes) else v


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


def depth_first_order(graph) -> tuple[list[str], dict]:
    """``(nodes in the order nirtorch.load runs them, the inputs of each node)``: depth first from the
    ``Input`` node, each node's children in the order of its edges (``trace_execution``)."""
    nexts, prevs = links(graph)
    nexts = {a: list(dict.fromkeys(bs)) for a, bs in nexts.items()}  # a child once, at its first edge
    start = next((n for n, node in graph.nodes.items() if type(node).__name__ == "Input"), None)
    order, seen, stack = [], set(), [] if start is None else [start]
    while stack:  # iterative pre-order, children in edge order
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        order.append(n)
        stack += [c for c in reversed(nexts.get(n, [])) if c not in seen]
    return order, prevs


def depth_first_late(graph) -> tuple[str, str] | None:
    """``(node, input)`` where ``nirtorch.load`` (Norse's and Sinabs' importer) would run ``node``
    before its ``input``, or None where it runs every node after its inputs.  It orders nodes depth
    first from the input, children in the order of the edges (``nirtorch.graph_utils.trace_execution``),
    reads an input not yet run at this step from the step before (none at the first step), and returns
    the value of the node run just before ``Output``: a node where two branches with layers of their own
    meet (a shortcut with a downsampling convolution) is reached through the first branch before the
    second has run."""
    order, prevs = depth_first_order(graph)
    done: set = set()
    for n in order:
        late = [p for p in prevs.get(n, []) if p not in done]
        if late:
            return n, late[0]
        done.add(n)
    out = [n for n in order if type(graph.nodes[n]).__name__ == "Output"]
    if out and (order[-1] != out[0] or prevs.get(out[0]) != order[-2:-1]):
        return out[0], order[-1] if order[-1] != out[0] else order[-2]
    return None


def check_target(graph, target: str) -> None:
    """Refuse (``ValueError`` naming the node) what ``target``'s importer would run differently from plif."""
    if target in ("norse", "sinabs"):
        late = depth_first_late(graph)
        if late is not None:
            remedy = (f"export --for {target}, whose file makes the join wait" if graph_meta(graph, "target") != target
                      else "no node of zeros fits to make it wait; export --for snntorch or generic")
            raise ValueError(f"node {late[0]!r}: {target}'s importer (nirtorch.load) runs nodes depth first and would "
                             f"run it before its input {late[1]!r} (two branches with layers of their own meet "
                             f"there, such as a shortcut with a downsampling convolution); {remedy}")
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


# the importers --check names, each with its target (the nodes and dt it needs)
IMPORTERS = (("plif", "generic", "plif.deploy.read_nir"), ("norse", "norse", "norse.torch.from_nir"),
              ("snntorch", "snntorch", "snntorch.import_nir.import_from_nir"),
              ("sinabs", "sinabs", "plif.deploy.nir_sinabs.sinabs_from_nir"))
IMPORTER_OF = {target: name for name, target, _ in IMPORTERS}  # the importer a target's file is for


def bn_nodes(graph) -> list[tuple[str, int | None, tuple | None]]:
    """``[(name, channels torch's convolution rounds otherwise than BatchNorm here, input shape)]``
    for each BatchNorm node of ``graph`` (:func:`~.nir_bn.conv_channels_off`; None: not measured)."""
    out = []
    for name, node in graph.nodes.items():
        if bn_form(node) is None:
            continue
        declared = (getattr(node, "input_type", None) or {}).get("input")  # NIR's Conv2d sets it from input_shape
        shape = None if declared is None else tuple(int(v) for v in np.ravel(declared).tolist())
        out.append((name, conv_channels_off(node, shape), shape))
    return out


def _norse_bn(graph) -> tuple[bool, str]:
    """Whether torch's convolution computes every BN node of ``graph`` as BatchNorm on this machine
    (the one thing Norse computes otherwise than plif), and what to say of it."""
    nodes = bn_nodes(graph)
    off = [(name, n, shape) for name, n, shape in nodes if n is None or n > 0]
    if not off:
        return True, (f"torch's convolution computes its {len(nodes)} BN node{'s' * (len(nodes) != 1)} as "
                      f"BatchNorm here, not on every machine" if nodes else "")
    # the worst node, in any node order
    name, n, shape = max(sorted(off), key=lambda o: (o[1] is None, 0 if o[1] is None else o[1] / o[2][0]))
    dims = "x".join(map(str, shape)) if shape else "of unknown shape"
    more = f" ({len(off)} of its {len(nodes)} BN nodes round otherwise)" if len(off) > 1 else ""
    if n is None:
        return False, (f"BN node {name!r} ({dims}) is too large to measure whether torch's convolution rounds "
                       f"it as BatchNorm{more}")
    return False, (f"torch's convolution computes {n} of the {shape[0]} channels of BN node {name!r} ({dims}) "
                   f"with one rounding more than BatchNorm here{more}")


class Verdict(NamedTuple):
    importer: str
    verdict: str  # exact, exact <where it was measured>, close, no or unknown: what importer_summary groups by
    line: str  # the verdict and why: what importer_report gives and --check prints
    retarget: bool = False  # the file is for another dt: export --for the importer's target runs there


def verdicts(graph, here: str) -> list[Verdict]:
    dt = graph_meta(graph, "dt")
    if graph_meta(graph, "source") != "plif" or dt is None:
        return [Verdict(name, "unknown", "unknown: not a file plif exported (no metadata['dt'])")
                for name, _, _ in IMPORTERS]
    dt = float(dt)
    inexact = [why for key, why in (("bn", "BatchNorm folded into the conv"),
                                    ("leak", "a trained k without a float32 tau at this dt"))
               if graph_meta(graph, key) != "exact"]
    out = []
    for name, target, call in IMPORTERS:
        t = TARGETS[target]
        try:
            check_target(graph, target)
        except ValueError as e:
            out.append(Verdict(name, "no", f"no: {e}"))
            continue
        if t.dt_fixed and dt != t.dt:
            out.append(Verdict(name, "no", f"no: it steps with dt = {t.dt:g}, the file is for dt = {dt!r}; "
                                            f"{t.other_dt}: export --for {target}", retarget=True))
        elif not t.exact:
            out.append(Verdict(name, "close", f"close, not exact: it rounds differently from plif ({call})"))
        elif inexact:
            out.append(Verdict(name, "close", f"close, not exact: {' and '.join(inexact)} ({call})"))
        else:
            where = f"({call}" + (")" if t.dt_fixed or name == "plif" else f", dt={dt!r})")
            bn_exact, bn_says = (True, "") if name == "plif" else _norse_bn(graph)
            if not bn_exact:
                out.append(Verdict(name, "close", f"close, not exact: {bn_says} {where}"))
            elif bn_says:
                out.append(Verdict(name, f"exact {here}", f"exact {here} {where}: {bn_says}"))
            else:
                out.append(Verdict(name, "exact", f"exact {where}"))
    return out


def importer_report(graph, here: str = "on this machine") -> list[tuple[str, str]]:
    """``[(importer, verdict)]`` for plif's, Norse's, snnTorch's and Sinabs' importers: ``exact``
    (the trained network's spikes, bit for bit), ``close`` (runs, rounds differently), or ``no``,
    each with its reason, judged from the file's nodes and its metadata (``dt``, ``bn``, ``leak``).
    Norse runs a BatchNorm node as a convolution, which can round once more than BatchNorm
    (:mod:`.nir_bn`): it is ``exact`` only where each BN node is measured to round as BatchNorm on
    the machine that runs this (``here`` names that machine), else ``close``."""
    return [(v.importer, v.line) for v in verdicts(graph, here)]


def importer_summary(graph) -> str:
    """One line of :func:`importer_report` by verdict, what ``metadata["importers"]`` holds:
    ``exact: plif; exact on the machine that exported it: norse; no: snntorch (--for snntorch),
    sinabs (--for sinabs)``; ``(--for TARGET)`` where exporting for the importer's target runs the
    network there (the file is for another dt), not where the importer cannot run its nodes."""
    groups: dict[str, list[str]] = {}
    targets = {name: target for name, target, _ in IMPORTERS}
    for v in verdicts(graph, "on the machine that exported it"):
        groups.setdefault(v.verdict, []).append(v.importer + (f" (--for {targets[v.importer]})" if v.retarget else ""))
    return "; ".join(f"{verdict}: {', '.join(names)}" for verdict, names in groups.items())
