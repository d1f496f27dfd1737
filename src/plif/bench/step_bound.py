"""``plif bench bound``: plif's training step against its own products run alone (:mod:`plif.bench.products`),
in fp32 and in bf16 autocast, with SpikingJelly's step of the same network beside it where installed.

Each precision's rows are timed in one process, in turns (step, products, SpikingJelly, step, ...;
:func:`plif.bench.alternate.alternate`), so the load of other jobs falls on all of them alike; the
medians of the wall time per round are reported.  The step is the product's own
(:func:`plif.train.loop.train_step`, the finiteness flag and Adam included, ``plif train``'s
``--memory``), built as ``plif bench train`` builds its ``auto`` / ``auto+bf16`` rows, for a paper
network (``network``) or a residual zoo network (``model``).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import torch

from ..catalog import get_dataset
from .alternate import alternate
from .products import record_products, replay, summarize

__all__ = ["BoundRow", "bench_step_bound", "format_bound_table", "PRECISIONS"]

PRECISIONS = ("fp32", "bf16")


@dataclass
class BoundRow:
    precision: str
    bound_ms: float | None  # the step's products run alone
    step_ms: float | None  # plif's step
    spikingjelly_ms: float | None = None  # SpikingJelly's step of the same network (its own autocast for bf16)
    products: int = 0  # product calls per step
    note: str = ""
    top: list = field(default_factory=list)  # (operator and shapes, calls per step), most frequent first

    @property
    def over_bound(self) -> float | None:
        return self.step_ms / self.bound_ms if self.step_ms and self.bound_ms else None

    @property
    def over_spikingjelly(self) -> float | None:
        return self.spikingjelly_ms / self.step_ms if self.step_ms and self.spikingjelly_ms else None


def _synced(step, dev):
    if dev.type != "cuda":
        return step

    def run():
        step()
        torch.cuda.synchronize(dev)
    return run


def _steps(precision: str, entry, T: int, batch: int, dev, network: str | None, model: str | None,
           memory: str | None, spikingjelly: bool, width: int | None):
    """``{name: step}`` for one precision: plif's, and SpikingJelly's (None where it is not installed)."""
    from .spikingjelly import spikingjelly_unavailable
    from .train import _build_step, _inputs, _model_step

    suffix = "+bf16" if precision == "bf16" else ""
    x, xs, y = _inputs(entry, T, batch, dev)
    variants = {"step": "auto" + suffix}
    if spikingjelly and not spikingjelly_unavailable() and width in (None, 64):  # its ResNets are 64 wide only
        variants["spikingjelly"] = "spikingjelly" + suffix
    steps = {}
    for name, v in variants.items():
        torch.manual_seed(0)
        steps[name] = (_build_step(v, entry, T, x, xs, y, dev, network, memory) if model is None
                       else _model_step(v, model, entry, T, x, xs, y, dev, memory, width))[0]
    return steps


def bench_step_bound(dataset: str = "fashion-mnist", batch: int = 16, T: int | None = None, device: str = "cpu",
                     precisions=None, rounds: int = 10, warmup: int = 2, network: str | None = None,
                     model: str | None = None, memory: str | None = None, spikingjelly: bool = True,
                     width: int | None = None) -> list[BoundRow]:
    """One :class:`BoundRow` per precision: plif's step on ``dataset``'s paper network (or ``network``, a
    notation string, or ``model``, a residual zoo name, at ``width`` if given), its products alone and
    SpikingJelly's step, each
    the median wall time of ``rounds`` turns after ``warmup``.  ``precisions``: default fp32, and bf16
    where the device runs it natively."""
    from ..layers.precision import native_bf16
    from ..train.malloc import keep_freed_memory

    from .train import check_model

    check_model(model)
    if width is not None and model is None:
        raise ValueError("width: the channels of a residual zoo network; give model= (plif bench bound --model)")
    if rounds < 1 or warmup < 0 or batch < 1:
        raise ValueError(f"rounds, batch must be >= 1 and warmup >= 0, got rounds={rounds}, batch={batch}, "
                         f"warmup={warmup}")
    dev = torch.device(device)
    entry = get_dataset(dataset)
    T = T or entry.T
    bf16 = dev.type == "cuda" or native_bf16()
    precisions = list(precisions or (PRECISIONS if bf16 else ("fp32",)))
    for p in precisions:
        if p not in PRECISIONS:
            raise ValueError(f"unknown precision {p!r}; valid: {', '.join(PRECISIONS)}")
    if dev.type == "cpu":
        keep_freed_memory()  # as plif train does on the CPU
    rows = []
    for p in precisions:
        steps = {k: _synced(s, dev) for k, s in _steps(p, entry, T, batch, dev, network, model, memory,
                                                        spikingjelly, width).items()}
        steps["step"]()  # the first step loads kernels and makes the optimizer state: not recorded
        calls = record_products(steps["step"])
        turns = {"step": steps["step"], "bound": _synced(replay(calls), dev)}
        if "spikingjelly" in steps:
            turns["spikingjelly"] = steps["spikingjelly"]
        _, wall = alternate(turns, rounds, warmup, clock=time.perf_counter)
        ms = {k: 1e3 * statistics.median(v) for k, v in wall.items()}
        note = "" if p == "fp32" or bf16 else "bf16 runs emulated here (no native bf16)"
        if spikingjelly and "spikingjelly" not in steps and width not in (None, 64):
            note = "; ".join(filter(None, [note, f"no SpikingJelly row: its ResNets are 64 wide, not {width}"]))
        rows.append(BoundRow(p, ms["bound"], ms["step"], ms.get("spikingjelly"), len(calls), note, summarize(calls)))
        del steps, turns
    return rows


def format_bound_table(rows: list[BoundRow], title: str, top: int = 0) -> str:
    """One line per precision; with ``top``, the most frequent products of each below it."""
    f = lambda v, fmt: format(v, fmt) if v is not None else "-"  # noqa: E731
    head = f"{'prec':4s} {'bound ms':>9s} {'step ms':>9s} {'step/bound':>10s} {'SJ ms':>9s} {'x SJ':>6s} {'products':>8s}"
    lines = [title, head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.precision:4s} {f(r.bound_ms, '.2f'):>9s} {f(r.step_ms, '.2f'):>9s} {f(r.over_bound, '.2f'):>10s} "
                     f"{f(r.spikingjelly_ms, '.2f'):>9s} {f(r.over_spikingjelly, '.2f'):>6s} {r.products:8d}"
                     + (f"  {r.note}" if r.note else ""))
        for what, n in r.top[:top]:
            lines.append(f"       {n:3d} x {what}")
    return "\n".join(lines)
