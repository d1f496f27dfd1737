"""The one event record every reader returns, and the error every reader raises."""
from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["EVENT_DTYPE", "EventFormatError", "make_events", "read_header_lines", "read_file_bytes"]

# t: microseconds (int64: AEDAT 3.1 overflow counters and AEDAT 4 epoch times exceed 32 bits);
# x, y: pixel column / row; p: polarity, 1 = ON (brighter), 0 = OFF.
EVENT_DTYPE = np.dtype([("t", "<i8"), ("x", "<u2"), ("y", "<u2"), ("p", "i1")])
"""The structured event record every reader returns, ``[N]`` of (t int64 us, x uint16, y uint16, p int8
with 1 = ON, 0 = OFF)."""


class EventFormatError(ValueError):
    """A file that does not hold what its format promises; the message names file and byte offset."""

    def __init__(self, path: str | Path, offset: int, what: str):
        super().__init__(f"{path}: byte offset {offset}: {what}")
        self.path, self.offset, self.what = str(path), int(offset), what


def read_file_bytes(path: str | Path) -> bytes:
    """The whole file; a directory or unreadable path is an :class:`EventFormatError` naming it
    (a missing file stays ``FileNotFoundError``, which names it too)."""
    p = Path(path)
    if p.is_dir():
        raise EventFormatError(path, 0, "is a directory, not an event file")
    if p.exists() and not p.is_file():  # a FIFO would block forever, /dev/zero never end
        raise EventFormatError(path, 0, "is not a regular file (a pipe, device or socket), not an event file")
    try:
        return p.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such event file") from None
    except OSError as e:
        raise EventFormatError(path, 0, f"cannot read: {e.strerror or e}") from None


def make_events(t, x, y, p) -> np.ndarray:
    """Pack equal-length arrays into one structured ``[N]`` array of :data:`EVENT_DTYPE`."""
    out = np.empty(len(t), dtype=EVENT_DTYPE)
    out["t"], out["x"], out["y"], out["p"] = t, x, y, p
    return out


def read_header_lines(data: bytes, path: str | Path, magic: bytes, end_marker: bytes | None = None
                      ) -> tuple[list[str], int]:
    """Split the ``#``-prefixed ASCII header off an AEDAT 2/3 buffer.

    Returns the header lines (without ``#`` and line ends) and the byte offset of the first data
    byte.  With ``end_marker`` (AEDAT 3.1's ``#!END-HEADER``) the header must end with that line;
    without it (AEDAT 2.0) the header ends at the first line that does not start with ``#``.
    """
    if not data.startswith(magic):
        raise EventFormatError(path, 0, f"expected magic {magic!r}, found {data[:len(magic)]!r}")
    lines, off = [], 0
    while off < len(data) and data[off:off + 1] == b"#":
        nl = data.find(b"\n", off)
        if nl < 0:
            raise EventFormatError(path, off, "header line without end (file truncated inside the header)")
        line = data[off:nl + 1].rstrip(b"\r\n").decode("latin-1")
        off = nl + 1
        if end_marker is not None and line.encode("latin-1") == end_marker:
            return lines, off
        lines.append(line[1:])
    if end_marker is not None:
        raise EventFormatError(path, off, f"header has no {end_marker.decode()} line")
    return lines, off
