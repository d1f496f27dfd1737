"""Format detection by content (version line / magic bytes), never by file extension."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from . import aedat2, aedat3, aedat4, nmnist
from .types import EventFormatError, read_file_bytes

__all__ = ["detect_format", "read_events", "event_info", "FORMATS"]

FORMATS = ("nmnist", "aedat2", "aedat3.1", "aedat4")


def _format_of(head: bytes, path: str | Path, atis: bool = False) -> str:
    """``atis``: the caller expects a headerless ATIS ``.bin`` (it gave the sensor size), whose first
    byte may be ``#`` (x = 35 on N-Caltech101's sensor): only the AEDAT magic lines count then."""
    if head.startswith(aedat4.MAGIC):
        return "aedat4"
    if head.startswith(aedat3.MAGIC):
        return "aedat3.1"
    if head.startswith(aedat2.MAGIC):
        return "aedat2"
    if head.startswith(b"#!AER-DAT"):
        version = head.split(b"\n", 1)[0].strip().decode("latin-1", "replace")
        raise EventFormatError(path, 0, f"unsupported AEDAT version line {version!r} "
                                        "(supported: 2.0, 3.1, 4.0)")
    if head.startswith(b"#") and not atis:
        raise EventFormatError(path, 0, "text header without an '#!AER-DAT<version>' line: not a known event format")
    return "nmnist"  # the one supported format without a header


def detect_format(path: str | Path) -> str:
    """One of :data:`FORMATS`.  A file without ``#`` header is N-MNIST ``.bin`` only if its events
    fit the 34x34 sensor; anything else is an :class:`EventFormatError` naming the file."""
    data = read_file_bytes(path)
    fmt = _format_of(data[:64], path)
    if fmt == "nmnist":
        nmnist.parse_nmnist(data, path)  # strict: refuses what is not N-MNIST
    return fmt


def read_events(path: str | Path, flip_x: bool = True, sensor_size: tuple[int, int] | None = None) -> np.ndarray:
    """Read any supported event file -> structured events ``[N]`` (fields t, x, y, p).

    ``flip_x`` applies to AEDAT 2.0 only (jAER's mirrored DVS128 x axis, see :mod:`.aedat2`);
    ``sensor_size`` ``(H, W)`` to headerless ATIS ``.bin`` only, whose events must fit it
    (default N-MNIST's 34 x 34; N-Caltech101 passes its 180 x 240).
    """
    data = read_file_bytes(path)
    fmt = _format_of(data[:64], path, atis=sensor_size is not None)
    if fmt == "aedat4":
        return aedat4.read_aedat4(path)
    if fmt == "aedat3.1":
        return aedat3.parse_aedat31(data, path)[0]
    if fmt == "aedat2":
        return aedat2.parse_aedat2(data, path, flip_x)[0]
    return nmnist.parse_nmnist(data, path, sensor_size)


def _sensor_from_header(lines: list[str]) -> tuple[int, int] | None:
    text = " ".join(lines).lower()
    if "davis346" in text:
        return (260, 346)
    if "dvs128" in text or "davis128" in text:
        return (128, 128)
    if "davis240" in text:
        return (180, 240)
    return None


def event_info(path: str | Path) -> dict:
    """Summary of one file: format, event count, first/last time and duration (us), sensor size
    ``(H, W)`` when the format or header states it, and the extent actually observed."""
    data = read_file_bytes(path)
    fmt = _format_of(data[:64], path)
    sensor = None
    if fmt == "aedat4":
        ev, sensor = aedat4.read_aedat4(path, with_sensor=True)
    elif fmt == "aedat3.1":
        ev, lines = aedat3.parse_aedat31(data, path)
        sensor = _sensor_from_header(lines) or aedat2.DVS128_SENSOR
    elif fmt == "aedat2":
        ev, lines = aedat2.parse_aedat2(data, path)
        sensor = _sensor_from_header(lines) or aedat2.DVS128_SENSOR
    else:
        ev, sensor = nmnist.parse_nmnist(data, path), nmnist.NMNIST_SENSOR
    n = len(ev)
    info = {"path": str(path), "format": fmt, "events": n, "bytes": len(data), "sensor_size": sensor,
            "t_first_us": int(ev["t"][0]) if n else None, "t_last_us": int(ev["t"][-1]) if n else None,
            "duration_us": int(ev["t"].max() - ev["t"].min()) if n else 0,
            "observed_size": (int(ev["y"].max()) + 1, int(ev["x"].max()) + 1) if n else None,
            "on_fraction": float(ev["p"].mean()) if n else None,
            "warnings": [] if n else ["no events: an empty recording (datasets refuse it unless allow_empty=True)"]}
    return info
