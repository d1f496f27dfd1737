"""Reader for the IDX format of MNIST and Fashion-MNIST, gzip-compressed or raw.

Layout (big-endian): two zero bytes, one type byte, one byte ``ndim``; ``ndim`` uint32 sizes;
then the payload, ``prod(sizes)`` items of the type.  Images are ``0x0803`` (uint8, 3 dims),
labels ``0x0801`` (uint8, 1 dim).
"""
from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np

from .memory import check_fits_memory

__all__ = ["read_idx", "IDX_TYPES"]

# type byte -> big-endian numpy dtype
IDX_TYPES = {
    0x08: np.dtype("u1"),
    0x09: np.dtype("i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}

GZIP_MAGIC = b"\x1f\x8b"


def _declared_bytes(head: bytes) -> int | None:
    """Total size (header + payload) an IDX header declares, or None when ``head`` is no IDX header."""
    if len(head) < 4 or head[:2] != b"\x00\x00" or head[2] not in IDX_TYPES or head[3] == 0:
        return None
    ndim = head[3]
    if len(head) < 4 + 4 * ndim:
        return None
    sizes = np.frombuffer(head, dtype=">u4", count=ndim, offset=4)
    return 4 + 4 * ndim + int(np.prod(sizes.astype(object))) * IDX_TYPES[head[2]].itemsize


def _read_bytes(path: Path) -> tuple[bytes, str]:
    """Return the (decompressed) content and a word for error messages saying which offsets apply.

    A gzip stream is decompressed only up to the size its IDX header declares (checked against the
    memory available first): a small ``.gz`` that expands to gigabytes is refused after reading
    one byte more than declared, not decompressed whole.
    """
    if not path.is_file():  # a directory, pipe or device: never read (a FIFO would block forever)
        raise ValueError(f"{path}: not a regular file") if path.exists() else FileNotFoundError(
            f"{path}: no such file")
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic != GZIP_MAGIC:  # by content, not by extension: renamed files are common
        return path.read_bytes(), "byte offset"
    try:
        with gzip.open(path, "rb") as f:
            head = f.read(4)
            if len(head) == 4:
                head += f.read(4 * head[3])
            total = _declared_bytes(head)
            if total is None:  # not IDX: read_idx reports the header; nothing more is needed
                return head, "decompressed byte offset"
            check_fits_memory(total, f"{path}: the IDX data its header declares ({total} bytes decompressed)",
                              "is this the right file?")
            data = head + f.read(total - len(head) + 1)
    except (EOFError, OSError, zlib.error) as e:
        raise ValueError(f"{path}: corrupt or truncated gzip stream ({e})") from None
    if len(data) > total:
        raise ValueError(f"{path}: the gzip stream decompresses to more than the {total} bytes its IDX header "
                         f"declares (stopped reading at decompressed byte offset {total}): not an intact IDX file")
    return data, "decompressed byte offset"


def read_idx(path: str | Path, expect_type: int | None = None, expect_ndim: int | None = None) -> np.ndarray:
    """Read one IDX file into an array of shape ``sizes`` with a native-endian dtype.

    ``expect_type`` / ``expect_ndim`` (e.g. ``0x08``, ``3`` for images) make a mismatching file an
    error instead of a surprise later.  Every error names the file and the byte offset.

    Example: a gzip-compressed label file written byte by byte (magic: two zero bytes, type 0x08 =
    unsigned byte, 1 dimension; its size, big-endian; the labels):

    >>> import gzip, tempfile
    >>> from pathlib import Path
    >>> from plif.data import read_idx
    >>> path = Path(tempfile.mkdtemp()) / "labels-idx1-ubyte.gz"
    >>> with gzip.open(path, "wb") as f:
    ...     _ = f.write(bytes([0, 0, 0x08, 1, 0, 0, 0, 3, 7, 2, 1]))
    >>> read_idx(path, expect_type=0x08, expect_ndim=1)
    array([7, 2, 1], dtype=uint8)
    >>> read_idx(path, expect_ndim=3)
    Traceback (most recent call last):
    ...
    ValueError: .../labels-idx1-ubyte.gz: IDX has 1 dimensions (byte at decompressed byte offset 3), expected 3
    """
    path = Path(path)
    data, where = _read_bytes(path)
    if len(data) < 4:
        raise ValueError(f"{path}: truncated at {where} {len(data)}: the IDX magic needs 4 bytes")
    zero, kind, ndim = data[0:2], data[2], data[3]
    if zero != b"\x00\x00" or kind not in IDX_TYPES:
        raise ValueError(f"{path}: bad IDX magic 0x{data[:4].hex()} at {where} 0 "
                         f"(expected 0x0000TTNN with type TT in {[hex(k) for k in IDX_TYPES]})")
    if ndim == 0:
        raise ValueError(f"{path}: IDX magic at {where} 0 declares 0 dimensions")
    if expect_type is not None and kind != expect_type:
        raise ValueError(f"{path}: IDX type 0x{kind:02x} at {where} 2, expected 0x{expect_type:02x}")
    if expect_ndim is not None and ndim != expect_ndim:
        raise ValueError(f"{path}: IDX has {ndim} dimensions (byte at {where} 3), expected {expect_ndim}")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ValueError(f"{path}: truncated at {where} {len(data)}: header with {ndim} sizes needs {header} bytes")
    sizes = tuple(int(s) for s in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    dtype = IDX_TYPES[kind]
    expected = int(np.prod(sizes, dtype=np.int64)) * dtype.itemsize
    got = len(data) - header
    if got != expected:
        state = "truncated" if got < expected else "has trailing bytes"
        raise ValueError(f"{path}: payload {state}: {got} bytes from {where} {header}, "
                         f"expected {expected} for sizes {sizes} of {dtype}")
    arr = np.frombuffer(data, dtype=dtype, offset=header).reshape(sizes)
    return arr.astype(dtype.newbyteorder("="), copy=True)
