"""The paper's frame integration as a Tonic-compatible transform (numpy only, Tonic not needed).

Tonic datasets yield structured event arrays with fields ``x``, ``y``, ``t``, ``p`` (any order,
extra fields ignored) and take transforms that are callables on them; sensor sizes are given in
Tonic's order ``(W, H, P)``.  ``ToPaperFrames`` returns float32 ``[T, 2, H, W]`` exactly as
:func:`plif.data.frames.events_to_frames` (the paper's integration of events into frames):

    import tonic
    ds = tonic.datasets.NMNIST("data", train=True,
                               transform=ToPaperFrames(tonic.datasets.NMNIST.sensor_size, 10))

It differs from ``tonic.transforms.ToFrame(n_event_bins=T)`` in one point: Tonic drops the last
``N mod T`` events, the paper's integration (SpikingJelly's) puts them in the last frame; with
``N`` a multiple of ``T`` both give the same frames.  Polarity ``p`` may be 0/1, bool, or -1/1
(-1 = OFF).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .events.types import make_events
from .frames import SPLITS, events_to_frames

__all__ = ["ToPaperFrames"]


@dataclass(frozen=True)
class ToPaperFrames:
    """A Tonic transform: structured events ``[N]`` (fields x, y, t, p) -> float32 frames ``[T, 2, H, W]``.

    ``sensor_size``: Tonic's ``(W, H, P)`` with P = 2; ``n_time_bins``: T; ``split``:
    ``"count"`` (the paper: equal event counts) or ``"time"`` (equal durations)."""

    sensor_size: tuple[int, int, int]
    n_time_bins: int
    split: str = "count"

    def __post_init__(self):
        if len(self.sensor_size) != 3 or int(self.sensor_size[2]) != 2:
            raise ValueError(f"sensor_size must be Tonic's (W, H, P) with P = 2 polarities, got {self.sensor_size!r}")
        if self.split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {self.split!r}")

    def __call__(self, events: np.ndarray) -> np.ndarray:
        names = events.dtype.names or ()
        missing = [f for f in ("x", "y", "t", "p") if f not in names]
        if missing:
            raise ValueError(f"events need the fields x, y, t, p (structured array); missing {missing}, have {names}")
        p = events["p"].astype(np.int64)
        if p.size and p.min() < 0:
            if not np.isin(p, (-1, 1)).all():
                raise ValueError(f"polarity values must be 0/1 or -1/1, found range [{p.min()}, {p.max()}]")
            p = (p > 0).astype(np.int64)
        ev = make_events(events["t"].astype(np.int64), events["x"], events["y"], p)
        w, h, _ = (int(v) for v in self.sensor_size)
        return events_to_frames(ev, int(self.n_time_bins), (h, w), self.split)
