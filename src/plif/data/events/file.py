"""Frames of one event file: what ``plif data frames / show`` need, numpy only (no torch)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..frames import events_to_frames
from .detect import event_info, read_events
from .gesture import cut_events
from .nmnist import ATIS_SENSOR

__all__ = ["file_to_frames", "frames_of_events"]


def frames_of_events(events: np.ndarray, T: int, sensor_size: tuple[int, int], split: str, path) -> np.ndarray:
    """:func:`events_to_frames` whose errors (events outside the sensor, bad polarity) name ``path``."""
    try:
        return events_to_frames(events, T, tuple(sensor_size), split)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def file_to_frames(path: str | Path, T: int, split: str = "count", sensor_size: tuple[int, int] | None = None,
                   flip_x: bool = True, start: int | None = None, end: int | None = None) -> np.ndarray:
    """Frames ``[T, 2, H, W]`` float32 of one event file (optionally its ``[start, end)`` µs cut).

    ``sensor_size=None`` takes the size the format or header states (N-MNIST 34x34, DVS128
    128x128, AEDAT 4 from the file); an N-Caltech101 ``.bin`` needs it given (180x240).
    """
    given = sensor_size is not None
    if sensor_size is None:
        sensor_size = event_info(path)["sensor_size"]
        if sensor_size is None:
            raise ValueError(f"{path}: the file does not state its sensor size; give it (--sensor H,W)")
    # a given sensor may be an ATIS recording's (N-Caltech101): read .bin files up to the whole ATIS
    # sensor, and let the frames say which events do not fit the size given
    events = read_events(path, flip_x=flip_x, sensor_size=ATIS_SENSOR if given else None)
    if start is not None or end is not None:
        events = cut_events(events, start if start is not None else np.iinfo(np.int64).min,
                            end if end is not None else np.iinfo(np.int64).max)
    return frames_of_events(events, T, sensor_size, split, path)
