"""ATIS ``.bin`` files of N-MNIST and N-Caltech101 (Orchard et al. 2015): no header, 5 bytes per event.

Byte layout of one event: ``b0 = x``, ``b1 = y``, bit 7 of ``b2`` = polarity (1 = ON, as in the
dataset's ``Read_Ndataset.m`` where ``p = b2 >> 7``, and Tonic),
``t (us) = (b2 & 0x7F) << 16 | b3 << 8 | b4``.  A record with ``y = 240`` is a time-stamp overflow
marker, not an event: it is dropped and 2**13 us is added to the time of every later event, as
the dataset's reference reader does.  N-MNIST: sensor 34 x 34 (ATIS saccades on MNIST digits);
N-Caltech101: up to 240 x 180 (the ATIS sensor; each recording as wide as its image).

The format has no magic number, so a file is accepted only when it can be a recording: its size
is whole events, every event's coordinates fit the sensor asked for (N-MNIST's 34 x 34 unless
given), and its timestamps never go backwards (the sensor writes events in time order, and the
overflow records only make sense in that order).  Random bytes or a text file are refused instead
of decoded: ASCII fits N-Caltech101's 240 x 180 sensor, but its "timestamps" jump back and forth.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...catalog import ATIS_SENSOR, DATASETS
from .types import EventFormatError, make_events, read_file_bytes

__all__ = ["read_nmnist_bin", "parse_nmnist", "NMNIST_SENSOR", "OutsideSensorError"]

NMNIST_SENSOR = DATASETS["nmnist"].sensor_size  # (H, W) = (34, 34), from the dataset's description
class OutsideSensorError(EventFormatError):
    """A header-less file with an event outside the sensor asked for: not N-MNIST (or not a recording)."""


OVERFLOW_Y = 240  # y of a time-stamp overflow record
OVERFLOW_US = 1 << 13  # what the reference reader adds per overflow record


def _check(data: bytes, path, sensor: tuple[int, int]) -> np.ndarray:
    whole = len(data) - len(data) % 5
    b = np.frombuffer(data, dtype=np.uint8, count=whole).reshape(-1, 5)
    marker = b[:, 1] == OVERFLOW_Y
    bad = np.flatnonzero(((b[:, 0] >= sensor[1]) | (b[:, 1] >= sensor[0])) & ~marker)
    if len(bad):
        i = int(bad[0])
        raise OutsideSensorError(path, 5 * i, f"not a recognised event file: no AEDAT header, and read as ATIS .bin "
                                            f"(N-MNIST) its event {i} has x={b[i, 0]}, y={b[i, 1]} outside the "
                                            f"{sensor[0]}x{sensor[1]} sensor")
    if len(data) % 5:
        raise EventFormatError(path, whole, f"truncated event: {len(data) % 5} of 5 bytes (file size {len(data)})")
    return b


def _check_time_order(t: np.ndarray, rows: np.ndarray, path) -> None:
    """Refuse timestamps that go backwards; ``rows``: each event's record number (for the byte offset)."""
    back = np.flatnonzero(t[1:] < t[:-1])
    if len(back):
        i = int(back[0]) + 1
        raise EventFormatError(path, 5 * int(rows[i]), f"not an ATIS recording: its time goes backwards at event {i} "
                                                       f"({int(t[i])} us after {int(t[i - 1])} us; {len(back)} such), "
                                                       "which a sensor writing events in time order never does")


def parse_nmnist(data: bytes, path: str | Path = "<bytes>", sensor: tuple[int, int] | None = None) -> np.ndarray:
    """Decode an ATIS ``.bin`` buffer -> structured events ``[N]`` (t, x, y, p), file order.

    ``sensor`` ``(H, W)``: the size every event must fit (default N-MNIST's 34 x 34).  What cannot be
    a recording (see the module's docstring) is an :class:`EventFormatError` naming the byte."""
    b = _check(data, path, tuple(sensor) if sensor is not None else NMNIST_SENSOR)
    b2 = b[:, 2].astype(np.int64)
    t = ((b2 & 0x7F) << 16) | (b[:, 3].astype(np.int64) << 8) | b[:, 4]
    marker = b[:, 1] == OVERFLOW_Y
    rows = np.arange(len(b))
    if marker.any():
        t = t + OVERFLOW_US * np.cumsum(marker)
        b, t, b2, rows = b[~marker], t[~marker], b2[~marker], rows[~marker]
    _check_time_order(t, rows, path)
    return make_events(t, b[:, 0], b[:, 1], b2 >> 7)


def read_nmnist_bin(path: str | Path, sensor: tuple[int, int] | None = None) -> np.ndarray:
    """Read one ATIS ``.bin`` sample (N-MNIST, N-Caltech101) -> structured events ``[N]`` (t, x, y, p).

    Example: two events written byte by byte (x, y, then polarity in bit 7 above a 23-bit time in us):

    >>> import tempfile
    >>> from pathlib import Path
    >>> from plif.data.events import read_nmnist_bin
    >>> path = Path(tempfile.mkdtemp()) / "00002.bin"
    >>> _ = path.write_bytes(bytes([3, 5, 0x80, 0, 10,   4, 5, 0x00, 0, 25]))
    >>> events = read_nmnist_bin(path)
    >>> events.dtype.names, events.tolist()                 # (t us, x, y, p): ON at 10 us, OFF at 25 us
    (('t', 'x', 'y', 'p'), [(10, 3, 5, 1), (25, 4, 5, 0)])
    """
    return parse_nmnist(read_file_bytes(path), path, sensor)
