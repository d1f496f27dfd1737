"""N-MNIST ``.bin`` files (Orchard et al. 2015): no header, 5 bytes per event.

Byte layout of one event: ``b0 = x``, ``b1 = y``, bit 7 of ``b2`` = polarity,
``t (us) = (b2 & 0x7F) << 16 | b3 << 8 | b4``.  Sensor 34 x 34 (ATIS saccades on MNIST digits).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .types import EventFormatError, make_events

__all__ = ["read_nmnist_bin", "NMNIST_SENSOR"]

NMNIST_SENSOR = (34, 34)  # (H, W)


def read_nmnist_bin(path: str | Path) -> np.ndarray:
    """Read one N-MNIST sample -> structured events ``[N]`` (t, x, y, p), file order."""
    data = Path(path).read_bytes()
    if len(data) % 5:
        whole = len(data) - len(data) % 5
        raise EventFormatError(path, whole, f"truncated event: {len(data) % 5} of 5 bytes (file size {len(data)})")
    b = np.frombuffer(data, dtype=np.uint8).reshape(-1, 5)
    b2 = b[:, 2].astype(np.int64)
    t = ((b2 & 0x7F) << 16) | (b[:, 3].astype(np.int64) << 8) | b[:, 4]
    return make_events(t, b[:, 0], b[:, 1], b2 >> 7)
