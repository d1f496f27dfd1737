"""A NIR graph's edges as links: each node's children and inputs, in the order of the edges, and
the nodes a walk along such links reaches.  Read by plif's importer (:func:`~.nir_import.node_order`),
nirtorch's order (:func:`~.nir_targets.depth_first_order`) and the zero nodes that fix it
(:mod:`.nir_order`)."""
from __future__ import annotations

__all__ = ["links", "reachable"]


def links(graph) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """``(children, inputs)`` of every node that has any, in the order of ``graph.edges`` (an edge
    given twice is listed twice)."""
    nexts: dict[str, list[str]] = {}
    prevs: dict[str, list[str]] = {}
    for a, b in graph.edges:
        nexts.setdefault(a, []).append(b)
        prevs.setdefault(b, []).append(a)
    return nexts, prevs


def reachable(step: dict[str, list[str]], start: str) -> set[str]:
    """``start`` and every node reached from it along ``step`` (children: its descendants; inputs:
    its ancestors)."""
    out, stack = set(), [start]
    while stack:
        n = stack.pop()
        if n not in out:
            out.add(n)
            stack += step.get(n, [])
    return out
