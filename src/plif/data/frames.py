"""Event streams -> frames ``[T, 2, H, W]`` (the supplement's Preprocessing of neuromorphic
datasets), by one ``np.bincount`` over a flat index."""
from __future__ import annotations

import numpy as np

from .memory import check_fits_memory

__all__ = ["events_to_frames", "slice_index", "check_frame_shape", "check_coordinates", "SPLITS"]

SPLITS = ("count", "time")
"""How :func:`slice_index` cuts a stream into T slices: equal event counts (the paper) or equal durations."""


def slice_index(events: np.ndarray, T: int, split: str = "count") -> np.ndarray:
    """Slice number ``j in [0, T)`` of every event ``[N]`` (int64).

    ``"count"``: slice j holds events ``[floor(N/T)*j, floor(N/T)*(j+1))`` in file order, the last
    slice the remainder up to N.  So with ``N < T`` all events land in the last slice.
    ``"time"``: T equal intervals of ``[t_min, t_max]``; ``j = (t - t_min) * T // (t_max - t_min + 1)``
    in exact integer arithmetic.
    """
    if T < 1:
        raise ValueError(f"T must be >= 1, got {T}")
    n = len(events)
    if split == "count":
        per = n // T
        if per == 0:
            return np.full(n, T - 1, dtype=np.int64)
        return np.minimum(np.arange(n, dtype=np.int64) // per, T - 1)
    if split == "time":
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        t = events["t"].astype(np.int64)
        t0 = t.min()
        span = int(t.max() - t0) + 1
        if span * T >= 2**62:  # keep (t - t0) * T inside int64
            return np.minimum(((t - t0) / span * T).astype(np.int64), T - 1)
        return (t - t0) * T // span
    raise ValueError(f"unknown split {split!r}; choose one of {SPLITS}")


def check_coordinates(events: np.ndarray, sensor_size: tuple[int, int]) -> None:
    """The one rule for events and a sensor (frames and ``plif data info`` alike): every event
    inside ``(H, W)``, polarity 0 or 1."""
    if len(events) == 0:
        return
    h, w = int(sensor_size[0]), int(sensor_size[1])
    x, y, p = events["x"], events["y"], events["p"]
    if int(x.max()) >= w or int(y.max()) >= h:
        raise ValueError(f"event coordinates up to x={int(x.max())}, y={int(y.max())} do not fit sensor "
                         f"(H, W) = ({h}, {w})")
    if int(p.min()) < 0 or int(p.max()) > 1:
        raise ValueError(f"polarity values must be 0 or 1, found range [{int(p.min())}, {int(p.max())}]")


def check_frame_shape(T: int, sensor_size: tuple[int, int], samples: int = 1, hint: str | None = None) -> None:
    """The one check every frame-producing path makes before allocating: ``T >= 1``, a sensor of
    at least 1x1, and ``samples`` frame arrays ``[T, 2, H, W]`` (with the int64 counts they are
    integrated from: 12 bytes per element) within the memory available."""
    h, w = int(sensor_size[0]), int(sensor_size[1])
    if T < 1:
        raise ValueError(f"T must be >= 1, got {T}")
    if h < 1 or w < 1:
        raise ValueError(f"sensor size (H, W) = ({h}, {w}): both must be >= 1 (--sensor H,W)")
    shape = [T, 2, h, w] if samples == 1 else [samples, T, 2, h, w]
    check_fits_memory(int(np.prod(shape, dtype=object)) * 12, f"frames {shape} (float32, integrated from int64 counts)",
                      hint or "lower --T (or --sensor H,W)")


def events_to_frames(events: np.ndarray, T: int, sensor_size: tuple[int, int], split: str = "count") -> np.ndarray:
    """Integrate structured events ``[N]`` (fields t, x, y, p) into float32 frames ``[T, 2, H, W]``.

    ``F[j, p, y, x]`` = number of events of polarity p (0 = OFF, 1 = ON) at pixel (x, y) in slice j
    (see :func:`slice_index` for ``split``).  The shape is always ``[T, 2, H, W]``: ``N == 0`` gives
    all zeros, ``N < T`` with ``"count"`` puts every event in the last frame.  Events outside
    ``sensor_size = (H, W)`` are an error, not silently dropped.

    Example: four events into two frames of a 2 x 3 sensor, two events each (``split="count"``):

    >>> from plif.data.events import make_events
    >>> from plif.data.frames import events_to_frames
    >>> events = make_events(t=[0, 10, 20, 30], x=[0, 1, 1, 2], y=[0, 0, 1, 1], p=[1, 0, 1, 1])
    >>> frames = events_to_frames(events, T=2, sensor_size=(2, 3))
    >>> frames.shape                                        # [T, 2 polarities (OFF, ON), H, W]
    (2, 2, 2, 3)
    >>> frames[1, 1].tolist()                               # ON events of the second frame
    [[0.0, 0.0, 0.0], [0.0, 1.0, 1.0]]
    """
    h, w = int(sensor_size[0]), int(sensor_size[1])
    check_frame_shape(T, (h, w))
    j = slice_index(events, T, split)
    if len(events) == 0:
        return np.zeros((T, 2, h, w), dtype=np.float32)
    check_coordinates(events, (h, w))
    x = events["x"].astype(np.int64)
    y = events["y"].astype(np.int64)
    p = events["p"].astype(np.int64)
    flat = ((j * 2 + p) * h + y) * w + x
    counts = np.bincount(flat, minlength=T * 2 * h * w)
    return counts.astype(np.float32).reshape(T, 2, h, w)
