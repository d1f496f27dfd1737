"""Small builders shared by the tests (importable as ``plif_testing``: tests/ is on the path)."""
import gzip
import struct

import numpy as np

TINY_NET = "c4k3s1-BN-PLIF-MPk4s4-DP-FC100-PLIF-APk10s10"


def idx_bytes(arr: np.ndarray, type_byte: int = 0x08) -> bytes:
    """An IDX file, byte by byte: magic (0, 0, type, ndim), big-endian uint32 dims, big-endian data."""
    header = bytes([0, 0, type_byte, arr.ndim]) + b"".join(struct.pack(">I", d) for d in arr.shape)
    return header + arr.astype(arr.dtype.newbyteorder(">")).tobytes()


def write_idx(path, array: np.ndarray) -> None:
    """A gzip-compressed ubyte IDX file."""
    with gzip.open(path, "wb") as f:
        f.write(idx_bytes(array.astype(np.uint8)))


def make_images(n: int, seed: int):
    """Learnable 28x28 images: class c lights a bright bar at row band c, plus noise."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 10
    rng.shuffle(labels)
    x = rng.integers(0, 60, size=(n, 28, 28))
    for i, c in enumerate(labels):
        x[i, 2 + 2 * c: 4 + 2 * c, 4:24] = 250
    return x.astype(np.uint8), labels.astype(np.uint8)
