"""AEDAT 4.0 (iniVation DV; DVXplorer / DAVIS recordings, the CIFAR10-DVS AEDAT4 re-release).

Layout: ``#!AER-DAT4.0\\r\\n``, an int32 length and an ``IOHeader`` flatbuffer (compression,
data-table position, XML description of the streams), then packets ``int32 stream_id,
int32 size, size bytes`` of LZ4/ZSTD-compressed flatbuffers, then an optional data table.

The container is walked here (so a truncated or overrunning file is reported with its byte
offset); the compressed flatbuffers are decoded by the optional ``aedat`` package
(``pip install aedat``), imported only when an AEDAT 4 file is read.
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from .types import EventFormatError, make_events, read_file_bytes

__all__ = ["read_aedat4", "aedat4_layout"]

MAGIC = b"#!AER-DAT4.0\r\n"


def _io_header_table_position(buf: bytes) -> int:
    """``dataTablePosition`` (field 1, int64, default -1) of the IOHeader flatbuffer."""
    if len(buf) < 8:
        return -1
    table = struct.unpack_from("<I", buf, 0)[0]
    if table + 4 > len(buf):
        return -1
    vtable = table - struct.unpack_from("<i", buf, table)[0]
    if not 0 <= vtable <= len(buf) - 4:
        return -1
    vsize = struct.unpack_from("<H", buf, vtable)[0]
    if vsize < 4 + 2 * 2:  # no slot for field 1
        return -1
    field = struct.unpack_from("<H", buf, vtable + 4 + 2)[0]
    if field == 0 or table + field + 8 > len(buf):
        return -1
    return struct.unpack_from("<q", buf, table + field)[0]


def aedat4_layout(data: bytes, path: str | Path = "<bytes>") -> dict:
    """Check the container structure; return ``{"packets": {stream_id: count}, "data_end": offset,
    "offsets": [byte offset of each packet, in file order]}``."""
    if not data.startswith(MAGIC):
        raise EventFormatError(path, 0, f"expected magic {MAGIC!r}, found {data[:len(MAGIC)]!r}")
    off = len(MAGIC)
    if len(data) < off + 4:
        raise EventFormatError(path, off, "truncated before the IOHeader length")
    hlen = struct.unpack_from("<i", data, off)[0]
    off += 4
    if hlen < 0 or off + hlen > len(data):
        raise EventFormatError(path, off - 4, f"IOHeader of {hlen} bytes overruns the file ({len(data) - off} left)")
    table_pos = _io_header_table_position(data[off:off + hlen])
    off += hlen
    end = table_pos if off <= table_pos <= len(data) else len(data)
    packets: dict[int, int] = {}
    offsets: list[int] = []
    while off < end:
        if end - off < 8:
            raise EventFormatError(path, off, f"truncated packet header: {end - off} of 8 bytes")
        sid, size = struct.unpack_from("<ii", data, off)
        if size < 0 or off + 8 + size > end:
            raise EventFormatError(path, off, f"packet of stream {sid} with {size} bytes overruns the data "
                                              f"({end - off - 8} bytes left)")
        packets[sid] = packets.get(sid, 0) + 1
        offsets.append(off)
        off += 8 + size
    return {"packets": packets, "data_end": end, "offsets": offsets}


def read_aedat4(path: str | Path, with_sensor: bool = False):
    """Read the polarity events of an AEDAT 4 file -> structured events ``[N]`` (absolute us).

    With ``with_sensor=True`` returns ``(events, (H, W))`` from the stream description.
    Needs the optional ``aedat`` package.
    """
    layout = aedat4_layout(read_file_bytes(path), path)
    try:
        import aedat
    except ImportError:
        raise ImportError(f"{path}: reading AEDAT 4.0 needs the optional package 'aedat' (pip install aedat)") from None
    chunks, done = [], -1  # packets decoded so far (-1: the IOHeader): on failure the next one is the culprit
    try:
        dec = aedat.Decoder(str(path))
        streams = dec.id_to_stream()
        done = 0
        for pkt in dec:
            if "events" in pkt:
                chunks.append(pkt["events"])
            done += 1
    except (OSError, RuntimeError, ValueError) as e:
        offsets = layout["offsets"]
        at = len(MAGIC) if done < 0 else offsets[min(done, len(offsets) - 1)] if offsets else len(MAGIC)
        what = "the IOHeader" if done < 0 else f"packet {done}"
        raise EventFormatError(path, at, f"AEDAT 4 decoding failed in {what}: {e}") from None
    ev = np.concatenate(chunks) if chunks else np.zeros(0, dtype=[("t", "<u8"), ("x", "<u2"), ("y", "<u2"), ("on", "?")])
    pol = ev.dtype.names[3]  # the polarity field is titled ("p", "on") by aedat
    events = make_events(ev["t"].astype(np.int64), ev["x"], ev["y"], ev[pol].astype(np.int8))
    if not with_sensor:
        return events
    ev_stream = next((s for s in streams.values() if s.get("type") == "events"), {})
    sensor = (ev_stream["height"], ev_stream["width"]) if "height" in ev_stream else None
    return events, sensor
