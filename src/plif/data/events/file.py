"""Frames of one event file: what ``plif data frames / show`` need, numpy only (no torch)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from ..frames import check_frame_shape, events_to_frames
from .detect import read_for_sensor, time_warnings
from .gesture import cut_events

__all__ = ["file_to_frames", "frames_of_events"]


def frames_of_events(events: np.ndarray, T: int, sensor_size: tuple[int, int], split: str, path) -> np.ndarray:
    """:func:`events_to_frames` whose errors (events outside the sensor, bad polarity) name ``path``."""
    try:
        return events_to_frames(events, T, tuple(sensor_size), split)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def file_to_frames(path: str | Path, T: int, split: str = "count", sensor_size: tuple[int, int] | None = None,
                   flip_x: bool = True, start: int | None = None, end: int | None = None,
                   allow_empty: bool = False, warn: Callable[[str], None] | None = None) -> np.ndarray:
    """Frames ``[T, 2, H, W]`` float32 of one event file (optionally its ``[start, end)`` µs cut).

    ``sensor_size=None`` takes the size the format or header states (N-MNIST 34x34, DVS128
    128x128, AEDAT 4 from the file); an N-Caltech101 ``.bin`` needs it given (180x240), and
    the error of one read without it says so (:func:`.detect.read_for_sensor`).  A
    recording, or a cut, without events is an error unless ``allow_empty`` (all-zero frames then);
    ``warn`` hears about timestamps going backwards.
    """
    if start is not None and end is not None and start >= end:
        raise ValueError(f"--start {start} must be less than --end {end} (the cut is [start, end) us)")
    if sensor_size is not None:
        check_frame_shape(T, sensor_size)  # a hopeless --T / --sensor is refused before the file is read
    events, sensor_size, _, _ = read_for_sensor(path, flip_x, sensor_size)
    if sensor_size is None:
        raise ValueError(f"{path}: the file does not state its sensor size; give it (--sensor H,W)")
    if warn is not None:
        for w in time_warnings(events):
            warn(w)
    whole = events
    if start is not None or end is not None:
        events = cut_events(events, start if start is not None else np.iinfo(np.int64).min,
                            end if end is not None else np.iinfo(np.int64).max)
    if len(events) == 0 and not allow_empty:
        if len(whole):
            span = f"the recording spans {int(whole['t'].min())}..{int(whole['t'].max())} us"
            cut = f"[{'-inf' if start is None else start}, {'inf' if end is None else end})"
            raise ValueError(f"{path}: no events in the cut {cut} us ({span}); "
                             "--allow-empty writes all-zero frames")
        raise ValueError(f"{path}: no events: an empty recording; --allow-empty writes all-zero frames")
    return frames_of_events(events, T, sensor_size, split, path)
