"""N-MNIST ``.bin`` files (Orchard et al. 2015): no header, 5 bytes per event.

Byte layout of one event: ``b0 = x``, ``b1 = y``, bit 7 of ``b2`` = polarity (1 = ON, as in the
dataset's ``Read_Ndataset.m`` where ``p = b2 >> 7``, and Tonic),
``t (us) = (b2 & 0x7F) << 16 | b3 << 8 | b4``.  Sensor 34 x 34 (ATIS saccades on MNIST digits).

The format has no magic number, so a file is accepted as N-MNIST only when every event's
coordinates fit the 34 x 34 sensor: random bytes or a text file are refused instead of decoded.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..catalog import DATASETS
from .types import EventFormatError, make_events, read_file_bytes

__all__ = ["read_nmnist_bin", "parse_nmnist", "NMNIST_SENSOR"]

NMNIST_SENSOR = DATASETS["nmnist"].sensor_size  # (H, W) = (34, 34), from the dataset's description


def _check(data: bytes, path) -> np.ndarray:
    whole = len(data) - len(data) % 5
    b = np.frombuffer(data, dtype=np.uint8, count=whole).reshape(-1, 5)
    bad = np.flatnonzero((b[:, 0] >= NMNIST_SENSOR[1]) | (b[:, 1] >= NMNIST_SENSOR[0]))
    if len(bad):
        i = int(bad[0])
        raise EventFormatError(path, 5 * i, f"not a recognised event file: no AEDAT header, and read as N-MNIST "
                                            f"its event {i} has x={b[i, 0]}, y={b[i, 1]} outside the "
                                            f"{NMNIST_SENSOR[0]}x{NMNIST_SENSOR[1]} sensor")
    if len(data) % 5:
        raise EventFormatError(path, whole, f"truncated event: {len(data) % 5} of 5 bytes (file size {len(data)})")
    return b


def parse_nmnist(data: bytes, path: str | Path = "<bytes>") -> np.ndarray:
    """Decode an N-MNIST buffer -> structured events ``[N]`` (t, x, y, p), file order."""
    b = _check(data, path)
    b2 = b[:, 2].astype(np.int64)
    t = ((b2 & 0x7F) << 16) | (b[:, 3].astype(np.int64) << 8) | b[:, 4]
    return make_events(t, b[:, 0], b[:, 1], b2 >> 7)


def read_nmnist_bin(path: str | Path) -> np.ndarray:
    """Read one N-MNIST sample -> structured events ``[N]`` (t, x, y, p), file order."""
    return parse_nmnist(read_file_bytes(path), path)
