"""What ``plif export --check FILE`` prints: the file's metadata and, per importer, what it computed here
where it is installed (run on random input against plif's importer) or what is predicted from the
file's nodes and metadata (:mod:`.nir_targets`) where it is not.  Its own module, above both the
predictions and the runs (:mod:`.nir_compare`), so that neither imports the other."""
from __future__ import annotations

from . import nir_compare
from .nir_targets import IMPORTERS, Verdict, bn_nodes, graph_meta, verdicts

__all__ = ["describe", "input_line"]


def describe(graph, run: bool = False, samples: int = 2, seed: int = 0, log=None) -> list[str]:
    """What ``plif export --check FILE`` prints: the file's metadata (target, dt, bn, leak, T), then
    one line per importer.

    run: run the file in every importer installed here that can take it (``plif export --check``),
    on random input (:func:`~.nir_compare.check_input`: ``samples`` static inputs over ``T``), and
    say how many outputs differ from plif's importer (the trained network, for a file plif's export
    verified) and at which spiking node they first differ; where an importer is not installed, or
    ``run`` is False, the line says ``predicted`` and from what (:func:`importer_report`: the file's
    nodes and metadata, its BN nodes measured with torch's convolution here).  log: called with a
    line before each importer runs (they take seconds to minutes on a full-size network)."""
    values = {key: graph_meta(graph, key) for key in ("target", "dt", "bn", "leak", "T")}
    facts = ", ".join(f"{key} {v if isinstance(v, str) else v.item() if hasattr(v, 'item') else v!r}"
                      for key, v in values.items() if v is not None)  # .item(): numpy scalars from HDF5
    head = [facts or "no plif metadata", *input_line(graph),
            "importers (the trained network's spikes bit for bit: exact):"]
    x = None
    lines = []
    for v in verdicts(graph, "on this machine"):
        if v.importer == "plif" or v.verdict in ("no", "unknown"):
            lines.append(v.line)
            continue
        why = "from the file's nodes and metadata" + (", its BN nodes run through torch's convolution here"
                                                     if v.importer == "norse" and bn_nodes(graph) else "")
        if not run or not nir_compare.installed(v.importer):
            lines.append(f"predicted ({why}{'' if not run else f'; {v.importer} is not installed here'}): {v.line}")
            continue
        if x is None:
            x = nir_compare.check_input(graph, samples, seed)
        lines.append(_ran(graph, v, x, log, why))
    return head + [f"  {name:<9} {line}" for (name, _, _), line in zip(IMPORTERS, lines)]


def input_line(graph) -> list[str]:
    """What input the file expects, where its metadata records the training input's scaling:
    ``["input: (pixel / 255 - mean) / std per channel, mean [...], std [...]"]``, else ``[]``."""
    mean, std = graph_meta(graph, "input_mean"), graph_meta(graph, "input_std")
    if mean is None or std is None:
        return []
    show = lambda a: "[" + ", ".join(f"{float(v):.4g}" for v in list(a)) + "]"  # noqa: E731
    return [f"input: each channel as (pixel / 255 - mean) / std, as in training (x / 255 alone gives other "
            f"spikes): mean {show(mean)}, std {show(std)} (metadata input_mean, input_std)"]


def _ran(graph, v: Verdict, x, log, why: str) -> str:
    """The line of an importer that ran the file here (:func:`describe`)."""
    if log is not None:
        log(f"running the file in {v.importer} ...")
    try:
        r = nir_compare.run_against_plif(graph, v.importer, x)
    except Exception as e:  # an importer's own failure is what --check reports
        return f"failed here: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} ({why}: {v.line})"
    on = f"random input, {x.shape[1]} samples, T = {x.shape[0]}; {r['active']} of plif's outputs are not 0"
    ran = f"ran here: {r['differ']} of {r['total']} outputs differ from plif's ({on})"
    if r["first"] is not None:
        name, n, spikes = r["first"]
        ran += f"; the first spiking node that differs is {name!r} ({n} spikes of plif's {spikes})"
    exact = v.verdict.startswith("exact")
    if r["differ"] == 0 and r["first"] is None:
        verdict = "exact" if exact else "same on this input"
        return f"{verdict}: {ran}; predicted {why}: {v.line}"
    return f"differs: {ran}; predicted {why}: {v.line}"
