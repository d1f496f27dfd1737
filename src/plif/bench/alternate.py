"""Time several step functions in turns (A B A B ...) in one process, so other jobs' load falls on
all of them alike: the ratio of their times is what a run on a shared machine can measure."""
from __future__ import annotations

import time
from typing import Callable

__all__ = ["alternate"]


def alternate(steps: dict[str, Callable[[], object]], rounds: int, warmup: int = 1,
              clock: Callable[[], float] = time.process_time) -> tuple[dict[str, list], dict[str, list]]:
    """Run every step ``warmup`` times untimed, then ``rounds`` times each in turn.  Returns
    ``(cpu, wall)``: per step name, the seconds of each timed round by ``clock`` and by the wall."""
    for _ in range(warmup):
        for step in steps.values():
            step()
    cpu = {name: [] for name in steps}
    wall = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            c0, w0 = clock(), time.perf_counter()
            step()
            cpu[name].append(clock() - c0)
            wall[name].append(time.perf_counter() - w0)
    return cpu, wall
