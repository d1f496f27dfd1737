"""Event streams -> frames ``[T, 2, H, W]`` (the supplement's Preprocessing of neuromorphic
datasets), by one ``np.bincount`` over a flat index; spikes of a 1-d sensor of C channels (a
cochlea model's, SHD / SSC) -> frames ``[T, C]`` by the same slicing."""
from __future__ import annotations

import numpy as np

from .memory import check_fits_memory

__all__ = ["events_to_frames", "slice_index", "check_frame_shape", "check_coordinates", "frame_shape", "SPLITS"]

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


def frame_shape(sensor_size: tuple) -> tuple:
    """One frame of a sensor: ``(2, H, W)`` for a camera's ``(H, W)`` (OFF / ON polarities), ``(C,)``
    for a 1-d sensor of C channels ``(C,)`` (SHD / SSC's 700 cochlea channels: no polarity)."""
    if len(sensor_size) == 1:
        return (int(sensor_size[0]),)
    if len(sensor_size) != 2:
        raise ValueError(f"sensor size {tuple(sensor_size)}: expected (H, W) or (C,) channels")
    return (2, int(sensor_size[0]), int(sensor_size[1]))


def check_coordinates(events: np.ndarray, sensor_size: tuple) -> None:
    """The one rule for events and a sensor (frames and ``plif data info`` alike): every event
    inside ``(H, W)``, polarity 0 or 1; on a 1-d sensor ``(C,)`` every event's channel ``x`` below C
    and its row ``y`` 0 (its polarity is not counted: the channels have none)."""
    if len(events) == 0:
        return
    if len(sensor_size) == 1:
        c, x, y = int(sensor_size[0]), events["x"], events["y"]
        if int(x.max()) >= c or int(y.max()) != 0:
            raise ValueError(f"event channels up to x={int(x.max())} (rows up to y={int(y.max())}) do not fit "
                             f"the sensor of {c} channels (x < {c}, y = 0)")
        return
    h, w = int(sensor_size[0]), int(sensor_size[1])
    x, y, p = events["x"], events["y"], events["p"]
    if int(x.max()) >= w or int(y.max()) >= h:
        raise ValueError(f"event coordinates up to x={int(x.max())}, y={int(y.max())} do not fit sensor "
                         f"(H, W) = ({h}, {w})")
    if int(p.min()) < 0 or int(p.max()) > 1:
        raise ValueError(f"polarity values must be 0 or 1, found range [{int(p.min())}, {int(p.max())}]")


def check_frame_shape(T: int, sensor_size: tuple, samples: int = 1, hint: str | None = None) -> None:
    """The one check every frame-producing path makes before allocating: ``T >= 1``, a sensor of
    at least 1x1 (or 1 channel), and ``samples`` frame arrays ``[T, *frame_shape(sensor_size)]`` (with
    the int64 counts they are integrated from: 12 bytes per element) within the memory available."""
    if T < 1:
        raise ValueError(f"T must be >= 1, got {T}")
    if len(sensor_size) == 1 and int(sensor_size[0]) < 1:
        raise ValueError(f"sensor of {int(sensor_size[0])} channels: must be >= 1")
    if len(sensor_size) == 2 and (int(sensor_size[0]) < 1 or int(sensor_size[1]) < 1):
        h, w = int(sensor_size[0]), int(sensor_size[1])
        raise ValueError(f"sensor size (H, W) = ({h}, {w}): both must be >= 1 (--sensor H,W)")
    shape = [T, *frame_shape(sensor_size)] if samples == 1 else [samples, T, *frame_shape(sensor_size)]
    check_fits_memory(int(np.prod(shape, dtype=object)) * 12, f"frames {shape} (float32, integrated from int64 counts)",
                      hint or "lower --T (or --sensor H,W)")


def events_to_frames(events: np.ndarray, T: int, sensor_size: tuple, split: str = "count") -> np.ndarray:
    """Integrate structured events ``[N]`` (fields t, x, y, p) into float32 frames ``[T, 2, H, W]``.

    ``F[j, p, y, x]`` = number of events of polarity p (0 = OFF, 1 = ON) at pixel (x, y) in slice j
    (see :func:`slice_index` for ``split``).  The shape is always ``[T, 2, H, W]``: ``N == 0`` gives
    all zeros, ``N < T`` with ``"count"`` puts every event in the last frame.  Events outside
    ``sensor_size = (H, W)`` are an error, not silently dropped.

    A 1-d sensor ``sensor_size = (C,)`` (SHD / SSC's 700 channels) gives ``[T, C]``:
    ``F[j, c]`` = number of spikes of channel ``c`` (field x) in slice j, by the same slicing.

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
    shape = frame_shape(sensor_size)
    check_frame_shape(T, sensor_size)
    j = slice_index(events, T, split)
    if len(events) == 0:
        return np.zeros((T, *shape), dtype=np.float32)
    check_coordinates(events, sensor_size)
    if len(shape) == 1:  # channels: no polarity
        counts = np.bincount(j * shape[0] + events["x"].astype(np.int64), minlength=T * shape[0])
        return counts.astype(np.float32).reshape(T, shape[0])
    h, w = shape[1], shape[2]
    x = events["x"].astype(np.int64)
    y = events["y"].astype(np.int64)
    p = events["p"].astype(np.int64)
    flat = ((j * 2 + p) * h + y) * w + x
    counts = np.bincount(flat, minlength=T * 2 * h * w)
    return counts.astype(np.float32).reshape(T, 2, h, w)
