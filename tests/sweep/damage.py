"""Shared by the data-side sweep cases: real recordings and files to damage, and small writers of
crafted event files.  Nothing here runs plif; every function writes into a case's own folder."""
from __future__ import annotations

import contextvars
import gzip
import os
import shutil
import struct
from pathlib import Path

from .case import SkipCase, need

FMNIST = Path("/usr/share/datasets/fashion-mnist")
FM_FILES = {"train-images": "train-images-idx3-ubyte.gz", "train-labels": "train-labels-idx1-ubyte.gz",
            "test-images": "t10k-images-idx3-ubyte.gz", "test-labels": "t10k-labels-idx1-ubyte.gz"}
# the sweep's ``--shared`` folder (run.run_case sets it for each case, in the case's own thread)
SHARED_DATA: contextvars.ContextVar[Path] = contextvars.ContextVar(
    "shared_data", default=Path(__file__).resolve().parents[3] / "shared" / "data")


def shared(*parts: str) -> Path:
    """``parts`` under the shared sample data (``--shared``, default ``../shared/data``)."""
    return SHARED_DATA.get().joinpath(*parts)


def aedat2_header_sample() -> bytes:
    return need(shared("aedat2_header", "sample_aedat_header.aedat")).read_bytes()

# ------------------------------------------------------------------ static (IDX)


def fashion_copy(dst: Path) -> Path:
    """The four Fashion-MNIST files copied into ``dst`` (damaging a copy, never the originals)."""
    need(FMNIST)
    dst.mkdir(parents=True, exist_ok=True)
    for name in FM_FILES.values():
        shutil.copyfile(FMNIST / name, dst / name)
    return dst


def raw_idx(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes())


def regzip(path: Path, raw: bytes) -> None:
    path.write_bytes(gzip.compress(raw, compresslevel=1))


def gz_bomb(path: Path, head: bytes, extra_mib: int) -> None:
    """An IDX header and its payload, then ``extra_mib`` MiB of zeros, gzipped in a streaming way."""
    import zlib
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as f:
        f.write(comp.compress(head))
        block = bytes(1 << 20)
        for _ in range(extra_mib):
            f.write(comp.compress(block))
        f.write(comp.flush())

# ------------------------------------------------------------------ events


def nmnist_sample() -> bytes:
    return need(shared("nmnist", "sample_nmnist.bin")).read_bytes()


def nmnist_event(x: int, y: int, p: int, t: int) -> bytes:
    return bytes([x, y, (p << 7) | (t >> 16), (t >> 8) & 0xFF, t & 0xFF])


def nmnist_tree(root: Path, per_class: int = 2, splits=("Train", "Test"), events: int = 40) -> Path:
    """An N-MNIST layout cut from the real sample: ``per_class`` files of ``events`` events each,
    every file a different slice of the recording."""
    raw = nmnist_sample()
    n = len(raw) // 5
    k = 0
    for split in splits:
        for d in range(10):
            for i in range(1, per_class + 1):
                a = (k * events) % (n - events)
                f = root / split / str(d) / f"{i:05d}.bin"
                f.parent.mkdir(parents=True, exist_ok=True)
                f.write_bytes(raw[5 * a:5 * (a + events)])
                k += 1
    return root


AEDAT31_HEADER = b"#!AER-DAT3.1\r\n#Format: RAW\r\n#Source 1: DVS128\r\n#!END-HEADER\r\n"


def aedat31_packet(events, overflow: int = 0, etype: int = 1, size: int = 8, number: int | None = None) -> bytes:
    """One AEDAT 3.1 packet of ``(x, y, p, ts)`` polarity events (valid)."""
    body = b"".join(struct.pack("<Ii", (x << 17) | (y << 2) | (p << 1) | 1, ts) for x, y, p, ts in events)
    n = len(events) if number is None else number
    return struct.pack("<hhiiiiii", etype, 1, size, 4, overflow, n, n, n) + body


def aedat31(events=((1, 2, 1, 10), (3, 4, 0, 20), (5, 6, 1, 30)), header: bytes = AEDAT31_HEADER, **kw) -> bytes:
    return header + aedat31_packet(list(events), **kw)


AEDAT2_HEADER = b"#!AER-DAT2.0\r\n# This is a raw AE data file\r\n# AEChip: ch.unizh.ini.jaer.chip.retina.DVS128\r\n"


def aedat2(events=((1, 2, 1, 10), (3, 4, 0, 20), (5, 6, 1, 30)), header: bytes = AEDAT2_HEADER) -> bytes:
    """AEDAT 2.0 DVS128 ``(x_raw, y, p, ts)`` events, big-endian (address, timestamp)."""
    return header + b"".join(struct.pack(">II", (y << 8) | (x << 1) | (1 - p), ts) for x, y, p, ts in events)


def aedat4_sample() -> bytes:
    return need(shared("aedat4", "sample_dvxplorer.aedat4")).read_bytes()


def aedat4_parts(data: bytes) -> tuple[bytes, bytes, bytes]:
    """(magic + nothing, IOHeader, rest) of an AEDAT 4 file."""
    hlen = struct.unpack_from("<i", data, 14)[0]
    return data[:14], data[18:18 + hlen], data[18 + hlen:]


def aedat4_with_header(header: bytes, data: bytes | None = None) -> bytes:
    magic, _, rest = aedat4_parts(data if data is not None else aedat4_sample())
    return magic + struct.pack("<i", len(header)) + header + rest


def flatbuffer_field(buf: bytes, i: int) -> int | None:
    """Byte offset in ``buf`` of field ``i`` of the root table, or None."""
    table = struct.unpack_from("<I", buf, 0)[0]
    vtable = table - struct.unpack_from("<i", buf, table)[0]
    vsize = struct.unpack_from("<H", buf, vtable)[0]
    if 4 + 2 * i + 2 > vsize:
        return None
    rel = struct.unpack_from("<H", buf, vtable + 4 + 2 * i)[0]
    return table + rel if rel else None


def io_header_with_description(text: str, table_pos: int = -1, compression: int = 1) -> bytes:
    """A minimal IOHeader flatbuffer: ``compression`` (1: LZ4), ``table_pos``, ``text`` as description."""
    s = text.encode()
    # layout: root uoffset(4) | vtable (4 + 3*2 = 10, padded 12) | table: soffset(4) comp(4) pos(8) desc(4)
    vt = struct.pack("<HHHHH", 10, 24, 4, 8, 16) + b"\x00\x00"
    table_at = 4 + len(vt)
    table = struct.pack("<i", table_at - 4) + struct.pack("<i", compression) + struct.pack("<q", table_pos)
    desc_field_at = table_at + len(table)
    string_at = desc_field_at + 4
    table += struct.pack("<I", string_at - desc_field_at)
    body = struct.pack("<I", table_at) + vt + table + struct.pack("<I", len(s)) + s + b"\x00"
    return body + b"\x00" * (-len(body) % 4)


def io_header_fields(buf: bytes) -> tuple[int, str]:
    """(data table position, description) of an intact IOHeader flatbuffer."""
    pos_at, desc_at = flatbuffer_field(buf, 1), flatbuffer_field(buf, 2)
    pos = struct.unpack_from("<q", buf, pos_at)[0] if pos_at is not None else -1
    s = desc_at + struct.unpack_from("<I", buf, desc_at)[0]
    n = struct.unpack_from("<I", buf, s)[0]
    return pos, buf[s + 4:s + 4 + n].decode()


def aedat4_described(edit=lambda text: text, compression: int = 1) -> bytes:
    """The real AEDAT 4 sample with its IOHeader rebuilt around ``edit(description)`` (the data
    table position moved by the change of header length)."""
    data = aedat4_sample()
    _, old, _ = aedat4_parts(data)
    pos, text = io_header_fields(old)
    size = len(io_header_with_description(edit(text), pos, compression))  # the length does not depend on pos
    return aedat4_with_header(io_header_with_description(edit(text), pos + size - len(old), compression), data)


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def truncate_file(path: Path, keep: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(keep)


def flip_byte(path: Path, at: int, keep_stat: bool = False) -> None:
    st = path.stat()
    raw = bytearray(path.read_bytes())
    raw[at % len(raw)] ^= 0xFF
    with open(path, "r+b") as f:  # in place: same inode
        f.write(bytes(raw))
    if keep_stat:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def nudge_event(path: Path, keep_stat: bool = False) -> None:
    """Move the first N-MNIST event one pixel, in place (same size and inode; same mtime with
    ``keep_stat``): a valid recording with different content."""
    st = path.stat()
    raw = bytearray(path.read_bytes())
    raw[0] = (raw[0] + 1) % 34
    with open(path, "r+b") as f:
        f.write(bytes(raw))
    if keep_stat:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def skip_unless(cond: bool, why: str) -> None:
    if not cond:
        raise SkipCase(why)
