"""AEDAT 2.0 (jAER; the 2017 CIFAR10-DVS release).

Layout: ASCII header lines starting with ``#`` (the first ``#!AER-DAT2.0``), then big-endian
``uint32 address, uint32 timestamp (us)`` pairs.

DVS128 address layout (jAER's ``DVS128`` extractor, and the CIFAR10-DVS reader of the authors'
code): bit 0 is the event *type*, 0 for ON and 1 for OFF (jAER computes ``type = (1 - addr) & 1``),
so ``p = 1 - (addr & 1)``; ``x_raw = addr >> 1 & 0x7F``, ``y = addr >> 8 & 0x7F``; bit 15 flags
an external (non-pixel) event, which is dropped.  jAER draws the DVS128 with the x axis mirrored,
and the authors' reader takes ``x = 127 - x_raw``, which is the default here (``flip_x=False``
keeps the raw column).  32-bit timestamp wrap-arounds (a drop of more than 2**31 us) are unrolled
so ``t`` stays monotone.

DVS128 addresses never set a bit above 15.  DAVIS cameras write 32-bit addresses (x at bits
12..21, y at 22..30) to the same container; such files are refused, whether their ``# AEChip:``
line names the sensor or (files written by MATLAB's ``saveaerdat``) there is no such line and
only the address bits give them away: decoding them as DVS128 would give garbage coordinates.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .types import EventFormatError, make_events, read_file_bytes, read_header_lines

__all__ = ["read_aedat2", "parse_aedat2", "DVS128_SENSOR"]

MAGIC = b"#!AER-DAT2.0"
DVS128_SENSOR = (128, 128)  # (H, W)
_EXTERNAL_BIT = 1 << 15
_HIGH_BITS = np.uint32(0xFFFF0000)


def parse_aedat2(data: bytes, path: str | Path = "<bytes>", flip_x: bool = True) -> tuple[np.ndarray, list[str]]:
    """Decode an AEDAT 2.0 DVS128 buffer -> (events ``[N]``, header lines)."""
    header, off = read_header_lines(data, path, MAGIC)
    chip = next((l.split(":", 1)[1].strip() for l in header if l.strip().lower().startswith("aechip:")), "")
    body = len(data) - off
    if body and chip and not any(k in chip.lower() for k in ("dvs128", "tmpdiff128")):
        raise EventFormatError(path, off, f"events of AEChip {chip!r}: only the DVS128 address layout is supported")
    if body % 8:
        raise EventFormatError(path, off + body - body % 8, f"truncated event: {body % 8} of 8 bytes")
    pairs = np.frombuffer(data, dtype=">u4", offset=off).reshape(-1, 2)
    addr = pairs[:, 0]
    high = np.flatnonzero(addr & _HIGH_BITS)
    if len(high):
        i = int(high[0])
        where = f"AEChip {chip!r}" if chip else "no '# AEChip:' header line"
        raise EventFormatError(path, off + 8 * i,
                               f"address 0x{int(addr[i]):08x} sets bits above 15: a DAVIS-style address layout "
                               f"({where}); only DVS128 recordings (16-bit addresses) are supported")
    keep = (addr & _EXTERNAL_BIT) == 0
    addr = addr[keep]
    ts = pairs[keep, 1].astype(np.int64)
    if len(ts) > 1:
        wraps = np.concatenate([[0], np.cumsum(np.diff(ts) < -(1 << 31))])
        ts = ts + (wraps << 32)
    x = (addr >> 1) & 0x7F
    if flip_x:
        x = 127 - x
    return make_events(ts, x, (addr >> 8) & 0x7F, 1 - (addr & 1).astype(np.int8)), header


def read_aedat2(path: str | Path, flip_x: bool = True) -> np.ndarray:
    """Read an AEDAT 2.0 DVS128 file -> structured events ``[N]``.

    Example: one ON event at x = 3, y = 5, 10 us, written byte by byte (the header line, then a
    big-endian address and timestamp; jAER stores x mirrored and ON as bit 0 = 0):

    >>> import struct, tempfile
    >>> from pathlib import Path
    >>> from plif.data.events import read_aedat2
    >>> path = Path(tempfile.mkdtemp()) / "cat_0001.aedat"
    >>> address = 5 << 8 | (127 - 3) << 1 | 0
    >>> _ = path.write_bytes(b"#!AER-DAT2.0\\r\\n" + struct.pack(">II", address, 10))
    >>> read_aedat2(path).tolist()                           # (t us, x, y, p)
    [(10, 3, 5, 1)]
    """
    return parse_aedat2(read_file_bytes(path), path, flip_x)[0]
