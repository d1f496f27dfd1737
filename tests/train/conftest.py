import gzip
import struct

import numpy as np
import pytest

TINY_NET = "c4k3s1-BN-PLIF-MPk4s4-DP-FC100-PLIF-APk10s10"


def write_idx(path, array: np.ndarray) -> None:
    """An IDX file, byte by byte: magic (0, 0, type 0x08 = ubyte, ndim), big-endian dims, data."""
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(struct.pack(">I", d) for d in array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def make_images(n: int, seed: int):
    """Learnable 28x28 images: class c lights a bright bar at row band c, plus noise."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 10
    rng.shuffle(labels)
    x = rng.integers(0, 60, size=(n, 28, 28))
    for i, c in enumerate(labels):
        x[i, 2 + 2 * c: 4 + 2 * c, 4:24] = 250
    return x.astype(np.uint8), labels.astype(np.uint8)


@pytest.fixture(scope="session")
def tiny_fashion(tmp_path_factory):
    """A Fashion-MNIST-format folder with 200 train and 60 test synthetic images."""
    root = tmp_path_factory.mktemp("fmnist")
    for split, n, seed in (("train", 200, 1), ("t10k", 60, 2)):
        x, y = make_images(n, seed)
        write_idx(root / f"{split}-images-idx3-ubyte.gz", x)
        write_idx(root / f"{split}-labels-idx1-ubyte.gz", y)
    return root
