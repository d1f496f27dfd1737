"""AEDAT 3.1 (jAER / cAER; DVS128 Gesture).

Layout: ASCII header lines starting with ``#``, the first ``#!AER-DAT3.1``, the last
``#!END-HEADER\\r\\n``; then packets, each a 28-byte little-endian header

    int16 type, int16 source, int32 size, int32 ts_offset, int32 ts_overflow,
    int32 capacity, int32 number, int32 valid

followed by ``number * size`` bytes of events.  Only polarity packets (type 1, 8-byte events:
``uint32 data, int32 ts``) are decoded: ``x = data >> 17 & 0x7FFF``, ``y = data >> 2 & 0x7FFF``,
``p = data >> 1 & 1``, bit 0 = valid mark (invalidated events are dropped, as cAER does), and
``t = ts_overflow << 31 | ts``.  Other packet types (special, frames, IMU) are skipped by size.
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from .types import EventFormatError, make_events, read_file_bytes, read_header_lines

__all__ = ["read_aedat31", "parse_aedat31"]

MAGIC = b"#!AER-DAT3.1"
END_HEADER = b"#!END-HEADER"
PACKET_HEADER = struct.Struct("<hhiiiiii")  # 28 bytes
POLARITY_EVENT = 1
_POLARITY_DTYPE = np.dtype([("data", "<u4"), ("ts", "<i4")])


def parse_aedat31(data: bytes, path: str | Path = "<bytes>") -> tuple[np.ndarray, list[str]]:
    """Decode an AEDAT 3.1 buffer -> (events ``[N]``, header lines).

    The Python loop runs over packets (thousands per recording), never over events.
    """
    header, off = read_header_lines(data, path, MAGIC, END_HEADER)
    view = memoryview(data)
    pieces, counts, overflows, starts = [], [], [], []
    end = len(data)
    unpack = PACKET_HEADER.unpack_from
    while off < end:
        if end - off < PACKET_HEADER.size:
            raise EventFormatError(path, off, f"truncated packet header: {end - off} of {PACKET_HEADER.size} bytes")
        etype, _src, size, _tsoff, tsovf, _cap, number, _valid = unpack(data, off)
        if size <= 0 or number < 0:
            raise EventFormatError(path, off, f"bad packet header: event size {size}, event number {number}")
        if tsovf < 0:
            raise EventFormatError(path, off + 12, f"negative timestamp overflow counter {tsovf} in a packet header")
        payload = off + PACKET_HEADER.size
        nbytes = number * size
        if payload + nbytes > end:
            raise EventFormatError(path, off, f"packet of {number} x {size} bytes overruns the file "
                                              f"({end - payload} bytes left after its header)")
        if etype == POLARITY_EVENT:
            if size != _POLARITY_DTYPE.itemsize:
                raise EventFormatError(path, off, f"polarity packet with event size {size}, expected 8")
            # slices of a memoryview copy nothing; one join below copies every payload once
            pieces.append(view[payload:payload + nbytes])
            counts.append(number)
            overflows.append(tsovf)
            starts.append(payload)
        off = payload + nbytes
    ev = np.frombuffer(b"".join(pieces), dtype=_POLARITY_DTYPE)
    keep = (ev["data"] & 1).astype(bool)
    d = ev["data"][keep]
    t = ev["ts"][keep].astype(np.int64)
    if len(t) and t.min() < 0:
        raw = int(np.flatnonzero(keep)[int(np.argmax(t < 0))])  # index among all events of the file
        k = int(np.searchsorted(np.cumsum(counts), raw, side="right"))
        at = starts[k] + 8 * (raw - int(sum(counts[:k])))
        raise EventFormatError(path, at + 4, f"negative timestamp {int(ev['ts'][raw])} us (event {raw})")
    if any(overflows):
        t |= np.repeat(np.asarray(overflows, dtype=np.int64), counts)[keep] << 31
    return make_events(t, (d >> 17) & 0x7FFF, (d >> 2) & 0x7FFF, (d >> 1) & 1), header


def read_aedat31(path: str | Path) -> np.ndarray:
    """Read the polarity events of an AEDAT 3.1 file -> structured events ``[N]``.

    Example: a header and one polarity packet of two events, written byte by byte (each event a
    little-endian word ``x << 17 | y << 2 | p << 1 | valid`` and its time in us):

    >>> import struct, tempfile
    >>> from pathlib import Path
    >>> from plif.data.events import read_aedat31
    >>> path = Path(tempfile.mkdtemp()) / "user01_natural.aedat"
    >>> packet = struct.pack("<hhiiiiii", 1, 0, 8, 4, 0, 2, 2, 2)   # polarity, 2 events of 8 bytes
    >>> events = b"".join(struct.pack("<Ii", x << 17 | y << 2 | p << 1 | 1, t)
    ...                   for t, x, y, p in [(10, 3, 5, 1), (25, 4, 5, 0)])
    >>> _ = path.write_bytes(b"#!AER-DAT3.1\\r\\n#!END-HEADER\\r\\n" + packet + events)
    >>> read_aedat31(path).tolist()                         # (t us, x, y, p)
    [(10, 3, 5, 1), (25, 4, 5, 0)]
    """
    return parse_aedat31(read_file_bytes(path), path)[0]
