"""A NIR graph made to run in ``nirtorch.load``'s depth-first order (Norse's and Sinabs' importers).

``nirtorch.load`` runs the nodes depth first from the input, each node's children in the order of
its edges, and a node whose input has not run yet at this step reads that input's value from the step
before (:func:`~plif.deploy.nir_targets.depth_first_late`).  Where two branches with layers of their
own meet (a residual block whose shortcut downsamples), the join is reached through the first branch
before the second has run.  :func:`order_for_depth_first` fixes each such join ``J`` with an input
``Q`` that runs late: at the last node ``F`` that runs before ``J`` and leads to ``Q`` (the fork), the
branch towards ``Q`` is made ``F``'s first child, and a node of zeros ``Q -> Z -> A`` (``A``: the
fork's child on the way to ``J``) makes ``A`` wait for ``Q``'s branch: ``Z`` is a convolution (or
``Affine``) with zero weights and zero bias, shaped from ``Q``'s output to ``A``'s input (padding
makes a smaller frame larger), so ``A`` reads its input plus exact zeros, and the depth-first order
runs ``Q``'s branch, then ``A``'s, then ``J``.  Where no such node fits (a kernel that would not be
square, a shape it cannot make), the graph is left as it is and the target refuses it.
"""
from __future__ import annotations

import numpy as np

from .nir_check import node_shapes
from .nir_edges import links, reachable
from .nir_targets import depth_first_late, depth_first_order

__all__ = ["order_for_depth_first"]

MAX_FIXES = 256


def _zeros(nir, src: tuple, dst: tuple):
    """A node of zeros from per-sample shape ``src`` to ``dst``, or None where none fits."""
    if len(src) == 1 and len(dst) == 1:
        return nir.Affine(weight=np.zeros((dst[0], src[0]), dtype=np.float32), bias=np.zeros(dst[0], dtype=np.float32))
    if len(src) != 3 or len(dst) != 3 or dst[1] < src[1] or dst[2] < src[2]:
        return None
    pad = [-(-(d - s) // 2) for s, d in zip(src[1:], dst[1:])]  # out = in + 2 pad - k + 1
    kernel = [s + 2 * p + 1 - d for s, d, p in zip(src[1:], dst[1:], pad)]
    if kernel[0] != kernel[1]:  # NIR 1.0.8 types every kernel as square
        return None
    return nir.Conv2d(input_shape=np.array(src[1:]), weight=np.zeros((dst[0], src[0], *kernel), dtype=np.float32),
                      stride=np.array([1, 1]), padding=np.array(pad), dilation=np.array([1, 1]), groups=1,
                      bias=np.zeros(dst[0], dtype=np.float32))


def _fix(nir, graph, join: str, late: str) -> bool:
    order, prevs = depth_first_order(graph)
    ran = order[:order.index(join)]
    behind = reachable(prevs, late)  # late's ancestors
    forks = [n for n in ran if n in behind]
    if not forks:
        return False
    fork = forks[-1]
    nexts = links(graph)[0]
    children = list(dict.fromkeys(nexts.get(fork, [])))
    towards_late = [c for c in children if c in behind and c not in ran]
    towards_join = [c for c in children if c in ran and join in reachable(nexts, c)]
    if not towards_late or not towards_join:
        return False
    first = towards_join[0]
    shapes = node_shapes(graph)
    if shapes.get(late) is None or shapes.get(fork) is None:
        return False
    zeros = _zeros(nir, tuple(shapes[late]), tuple(shapes[fork]))
    name = f"{late}_before_{first}"
    if zeros is None or name in graph.nodes:
        return False
    graph.nodes[name] = zeros
    edges = [tuple(e) for e in graph.edges]
    edges.remove((fork, towards_late[0]))
    edges.insert(_first_from(edges, fork), (fork, towards_late[0]))  # the fork's first child: towards late
    edges.insert(_first_from(edges, late), (late, name))  # late's first child: the zeros
    edges.append((name, first))
    graph.edges = edges
    return True


def _first_from(edges: list, node: str) -> int:
    return next((i for i, (a, _) in enumerate(edges) if a == node), len(edges))


def order_for_depth_first(nir, graph) -> int:
    """Make ``graph`` (changed in place) run every node after its inputs in ``nirtorch.load``'s order
    (module docstring); the number of zero nodes added.  Where it cannot, the graph is left with what
    it fixed, and :func:`~plif.deploy.nir_targets.depth_first_late` still says where it runs late."""
    added = 0
    for _ in range(MAX_FIXES):
        late = depth_first_late(graph)
        if late is None or not _fix(nir, graph, *late):
            break
        added += 1
    return added
