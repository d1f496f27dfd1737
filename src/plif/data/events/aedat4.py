"""AEDAT 4.0 (iniVation DV; DVXplorer / DAVIS recordings, the CIFAR10-DVS AEDAT4 re-release).

Layout: ``#!AER-DAT4.0\\r\\n``, an int32 length and an ``IOHeader`` flatbuffer (compression,
data-table position, XML description of the streams), then packets ``int32 stream_id,
int32 size, size bytes`` of LZ4/ZSTD-compressed flatbuffers, then an optional data table.

The container is walked here (so a truncated or overrunning file is reported with its byte
offset); the compressed flatbuffers are decoded by the optional ``aedat`` package
(``pip install aedat``), imported only when an AEDAT 4 file is read.
"""
from __future__ import annotations

import os
import struct
import tempfile
from contextlib import contextmanager
from pathlib import Path
from xml.etree import ElementTree

import numpy as np

from .types import EventFormatError, make_events, read_file_bytes

__all__ = ["read_aedat4", "aedat4_layout", "parse_io_header"]

MAGIC = b"#!AER-DAT4.0\r\n"


COMPRESSIONS = ("NONE", "LZ4", "LZ4_HIGH", "ZSTD", "ZSTD_HIGH")  # the IOHeader's compression enum


def parse_io_header(buf: bytes, path: str | Path = "<bytes>", at: int = 0) -> dict:
    """Check the IOHeader flatbuffer (at file offset ``at``) field by field before any decoder
    sees it -> ``{"compression", "table_position", "description"}``.

    Schema (dv-processing ``IOHeader``): field 0 ``compression`` (int32 enum), field 1
    ``dataTablePosition`` (int64, default -1), field 2 ``description`` (string: the XML stream
    list).  Every offset must stay inside the header: junk here made the Rust decoder panic.
    """
    def bad(where: int, what: str):
        return EventFormatError(path, at + where, f"IOHeader: {what}")

    n = len(buf)
    if n < 8:
        raise bad(0, f"{n} bytes, too short for a flatbuffer")
    table = struct.unpack_from("<I", buf, 0)[0]
    if not 4 <= table <= n - 4:
        raise bad(0, f"root table offset {table} outside the {n}-byte header")
    vtable = table - struct.unpack_from("<i", buf, table)[0]
    if not 0 <= vtable <= n - 4:
        raise bad(table, f"vtable offset {vtable} outside the {n}-byte header")
    vsize, tsize = struct.unpack_from("<HH", buf, vtable)
    if vsize < 4 or vsize % 2 or vtable + vsize > n or tsize < 4 or table + tsize > n:
        raise bad(vtable, f"vtable of {vsize} bytes for a table of {tsize} bytes does not fit the header")

    def field(i: int, width: int) -> int | None:
        slot = 4 + 2 * i
        if slot + 2 > vsize:
            return None
        rel = struct.unpack_from("<H", buf, vtable + slot)[0]
        if rel == 0:
            return None
        if rel + width > tsize:
            raise bad(vtable + slot, f"field {i} at {rel} lies outside its {tsize}-byte table")
        return table + rel

    f = field(0, 4)
    comp = struct.unpack_from("<i", buf, f)[0] if f is not None else 0
    if not 0 <= comp < len(COMPRESSIONS):
        raise bad(f, f"unknown compression {comp} (known: {', '.join(COMPRESSIONS)})")
    f = field(1, 8)
    table_pos = struct.unpack_from("<q", buf, f)[0] if f is not None else -1
    f = field(2, 4)
    if f is None:
        raise bad(vtable, "no stream description")
    sref = f + struct.unpack_from("<I", buf, f)[0]
    if sref + 4 > n:
        raise bad(f, f"description offset {sref} outside the {n}-byte header")
    slen = struct.unpack_from("<I", buf, sref)[0]
    if slen == 0 or sref + 4 + slen > n:
        raise bad(sref, f"description of {slen} bytes does not fit the header")
    try:
        text = buf[sref + 4:sref + 4 + slen].decode("utf-8")
        root = ElementTree.fromstring(text)
    except (UnicodeDecodeError, ElementTree.ParseError) as e:
        raise bad(sref + 4, f"stream description is not XML ({e})") from None
    if root.tag != "dv":
        raise bad(sref + 4, f"stream description's root element is <{root.tag}>, expected <dv>")
    return {"compression": COMPRESSIONS[comp], "table_position": table_pos, "description": text}


def _check_lz4_frame(data: bytes, at: int, path) -> None:
    """The LZ4 frame of the data table at ``at`` must end exactly at the end of the file (its blocks
    walked by their sizes, up to the end mark): a file cut inside its table is refused."""
    n = len(data)
    if n - at < 7 or data[at:at + 4] != b"\x04\x22\x4d\x18":
        raise EventFormatError(path, at, "data table is not an LZ4 frame (file truncated or damaged)")
    flg = data[at + 4]
    pos = at + 7 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    block_sum = 4 if flg & 0x10 else 0
    while True:
        if pos + 4 > n:
            raise EventFormatError(path, min(pos, n), "data table's LZ4 frame is cut short: file truncated")
        size = struct.unpack_from("<I", data, pos)[0] & 0x7FFFFFFF
        pos += 4
        if size == 0:
            break
        pos += size + block_sum
    pos += 4 if flg & 0x04 else 0
    if pos != n:
        state = "cut short: file truncated" if pos > n else f"followed by {n - pos} stray bytes"
        raise EventFormatError(path, min(pos, n), f"data table's LZ4 frame is {state}")


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
    head = parse_io_header(data[off:off + hlen], path, off)
    table_pos = head["table_position"]
    off += hlen
    end = table_pos if off <= table_pos <= len(data) else len(data)
    if end < len(data) and head["compression"].startswith("LZ4"):
        _check_lz4_frame(data, end, path)
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
    if table_pos > len(data):  # every packet whole, but the data table they announce is gone
        raise EventFormatError(path, len(data), f"the IOHeader puts the data table at byte {table_pos}, beyond the "
                                                f"end of the {len(data)}-byte file: truncated")
    return {"packets": packets, "data_end": end, "offsets": offsets}


@contextmanager
def _rust_panics_quiet():
    """Keep a Rust panic's report (and backtrace) off the user's terminal: the panic reaches
    Python as an exception, which the caller turns into one line; fd 2 is restored after."""
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def read_aedat4(path: str | Path, with_sensor: bool = False):
    """Read the polarity events of an AEDAT 4 file -> structured events ``[N]`` (absolute us).

    With ``with_sensor=True`` returns ``(events, (H, W))`` from the stream description.
    Needs the optional ``aedat`` package.

    Example: a recording of a DV camera (the first two lines need one), and a file that is not
    AEDAT 4, refused before the decoder sees it:

    >>> events = read_aedat4("recording.aedat4")                          # doctest: +SKIP
    >>> events, (height, width) = read_aedat4("recording.aedat4", with_sensor=True)   # doctest: +SKIP
    >>> import tempfile
    >>> from pathlib import Path
    >>> from plif.data.events import read_aedat4
    >>> path = Path(tempfile.mkdtemp()) / "old.aedat4"
    >>> _ = path.write_bytes(b"#!AER-DAT3.1\\r\\n#!END-HEADER\\r\\n")
    >>> read_aedat4(path)
    Traceback (most recent call last):
    ...
    plif.data.events.types.EventFormatError: .../old.aedat4: byte offset 0: ...
    """
    layout = aedat4_layout(read_file_bytes(path), path)
    try:
        import aedat
    except ImportError:
        raise ImportError(f"{path}: reading AEDAT 4.0 needs the optional package 'aedat' (pip install aedat)") from None
    chunks, done = [], -1  # packets decoded so far (-1: the IOHeader): on failure the next one is the culprit
    try:
        with _rust_panics_quiet():
            dec = aedat.Decoder(str(path))
            streams = dec.id_to_stream()
            done = 0
            for pkt in dec:
                if "events" in pkt:
                    chunks.append(pkt["events"])
                done += 1
    except BaseException as e:  # the Rust decoder panics (pyo3 PanicException, a BaseException) on junk
        if not isinstance(e, (OSError, RuntimeError, ValueError)) and type(e).__name__ != "PanicException":
            raise
        offsets = layout["offsets"]
        at = len(MAGIC) if done < 0 else offsets[min(done, len(offsets) - 1)] if offsets else len(MAGIC)
        what = "the IOHeader" if done < 0 else f"packet {done}"
        raise EventFormatError(path, at, f"AEDAT 4 decoding failed in {what}: {e}") from None
    ev = np.concatenate(chunks) if chunks else np.zeros(0, dtype=[("t", "<u8"), ("x", "<u2"), ("y", "<u2"), ("on", "?")])
    pol = ev.dtype.names[3]  # the polarity field is titled ("p", "on") by aedat
    t = ev["t"].astype(np.int64)
    if len(t) and t.min() < 0:
        i = int(np.argmax(t < 0))
        raise EventFormatError(path, len(MAGIC), f"event {i} has timestamp {int(ev['t'][i])} us, beyond int64")
    events = make_events(t, ev["x"], ev["y"], ev[pol].astype(np.int8))
    if not with_sensor:
        return events
    ev_stream = next((s for s in streams.values() if s.get("type") == "events"), {})
    sensor = (ev_stream["height"], ev_stream["width"]) if "height" in ev_stream else None
    return events, sensor
