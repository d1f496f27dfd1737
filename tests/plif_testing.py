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


def tiny_train_config(root, out, **kw):
    """A TrainConfig of TINY_NET on the tiny Fashion-MNIST folder: 3 epochs of seconds on the CPU."""
    from plif.train import TrainConfig

    base = dict(dataset="fashion-mnist", data_dir=str(root), network=TINY_NET, T=2, epochs=3, batch_size=20,
                lr=5e-3, t_max=3, out=str(out), device="cpu", eval_batch_size=32)
    return TrainConfig(**{**base, **kw})


def quiet(*a, **k):
    """A ``log`` that prints nothing."""


def watch_chunk_builds(monkeypatch, kill_after: int | None = None) -> list:
    """Record the output path of every frame-cache chunk built from now on; with ``kill_after``,
    the build is interrupted (KeyboardInterrupt, as a kill would) when that many chunks are done."""
    from plif.data.events import cache

    calls, real = [], cache._build_chunk

    def build_chunk(chunk, out, *a):
        if kill_after is not None and len(calls) == kill_after:
            raise KeyboardInterrupt
        calls.append(out)
        return real(chunk, out, *a)

    monkeypatch.setattr(cache, "_build_chunk", build_chunk)
    return calls


class ZeroFills:
    """A torch dispatch mode that records the shape of every zero- or constant-filled tensor made
    under it (``with ZeroFills() as z: loss.backward()``, then ``z.shapes``): how a test sees
    autograd materialising a full-size zero gradient for an output that never reached the loss."""

    _NAMES = {"zeros", "zeros_like", "new_zeros", "zero_", "full", "full_like", "new_full", "fill_"}

    def __new__(cls):
        from torch.utils._python_dispatch import TorchDispatchMode

        class _Mode(TorchDispatchMode):
            def __init__(self):
                super().__init__()
                self.shapes = []

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                if func.overloadpacket.__name__ in ZeroFills._NAMES:
                    self.shapes.append(tuple(out.shape))
                return out
        return _Mode()
