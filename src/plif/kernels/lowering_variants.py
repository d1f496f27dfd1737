"""What the two lowering checks share: the :class:`Variant` record, the input dtypes, and how a set of
variants is chosen (all pairs of factors' values, shapes taken in turn).  :mod:`.lowering` lowers the
neuron kernels and :mod:`.lowering_block` lists the fused block's; both read this module, so neither
imports the other's private names."""
from __future__ import annotations

import itertools
from dataclasses import dataclass

__all__ = ["Variant", "DTYPES", "neuron_options", "cover", "in_turn"]

DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


@dataclass(frozen=True)
class Variant:
    """One kernel as a launcher may compile it: ``flags`` are its ``tl.constexpr`` values."""

    kernel: str  # "forward" or "backward"
    flags: tuple  # sorted (name, value) pairs
    num_warps: int
    x_dtype: str = "float32"
    h_dtype: str = "float32"
    unit_sizes: bool = False  # T = 1 and INNER = 1, which Triton's JIT specialises as constants

    @property
    def name(self) -> str:
        flags = ",".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in self.flags)
        unit = ",T=INNER=1" if self.unit_sizes else ""
        return f"{self.kernel}[{flags},warps={self.num_warps},{self.x_dtype},h={self.h_dtype}{unit}]"


def neuron_options():
    """``(leak, hard, per_channel)`` as the launchers combine them: IF has one ``k`` placeholder."""
    return [(leak, hard, pc) for leak, hard, pc in itertools.product((True, False), repeat=3) if leak or not pc]


def cover(rows: list[dict]) -> list[dict]:
    """A greedy all-pairs subset of ``rows``: deterministic, every pair of values that occurs in
    ``rows`` occurs in the subset (the first row covering the most new pairs wins each round)."""
    index: dict = {}
    masks = []
    for row in rows:  # each row's pairs as the bits of one integer
        mask = 0
        for pair in itertools.combinations(sorted(row.items()), 2):
            mask |= 1 << index.setdefault(pair, len(index))
        masks.append(mask)
    todo, chosen = (1 << len(index)) - 1, []
    while todo:
        best = max(range(len(rows)), key=lambda i: (masks[i] & todo).bit_count())
        chosen.append(rows[best])
        todo &= ~masks[best]
    return chosen


def in_turn(*seqs) -> list[tuple]:
    """One item of each of ``seqs`` at a time, each taken in turn and repeated until the longest has
    been taken once: ``(a[i % len(a)], b[i % len(b)], ...)`` for ``i < max(len(a), len(b), ...)``."""
    return [tuple(s[i % len(s)] for s in seqs) for i in range(max(len(s) for s in seqs))]
