"""Small builders shared by the tests (importable as ``plif_testing``: tests/ is on the path)."""
import gzip
import json
import os
import struct
from pathlib import Path

import numpy as np

TINY_NET = "c4k3s1-BN-PLIF-MPk4s4-DP-FC100-PLIF-APk10s10"

# the zoo's input sides shrunk so that every pooling of its network still has a window
SMALL_INPUT = {28: 12, 34: 12, 32: 8, 128: 32, 180: 16, 240: 16}


def narrow_zoo(name):
    """``(spec, input shape)``: zoo network ``name`` with its real layer sequence, 8 channels, 32 hidden
    features and 32 voting classes, on small frames (a 1-d input as it is).  (The tolerances of tests/models/test_memory.py
    were measured on these 32 classes.)"""
    import re

    from plif.catalog import get_dataset

    e = get_dataset(name)
    spec = re.sub(r"c\d+k", "c8k", e.network)
    # the voting layer (the FC before APk10s10) 32 classes x 10 voters, every other FC 32 features
    spec = re.sub(r"FC\d+(-PLIF-APk10s10)?", lambda m: "FC320" + m[1] if m[1] else "FC32", spec)
    if len(e.input_shape) == 1:  # channels (SHD / SSC's 700): as they are, 32 features after them are cheap
        return spec, e.input_shape
    c, h, w = e.input_shape
    return spec, (c, SMALL_INPUT[h], SMALL_INPUT[w])


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


def atis_bin(events) -> bytes:
    """An ATIS ``.bin`` file (N-MNIST, N-Caltech101): 5 bytes per ``(x, y, p, t_us)``; ``y = 240`` is
    a time-stamp overflow record."""
    return b"".join(bytes([x, y, (p << 7) | (t >> 16), (t >> 8) & 0xFF, t & 0xFF]) for x, y, p, t in events)


def write_nmnist(root, train: int = 3, test: int = 0, seed: int = 0) -> list:
    """An N-MNIST folder ``root/Train/<digit>/<k>.bin`` (``train`` per digit) and ``root/Test/...``
    (``test`` per digit) of random events; returns ``[(digit, (x, y, p, t))]`` of the training files
    in listing order."""
    rng = np.random.default_rng(seed)
    truth = []
    for split, n in (("Train", train), ("Test", test)):
        for d in range(10):
            for k in range(n):
                m = int(rng.integers(1, 60))
                t = np.sort(rng.integers(0, 100_000, m))
                ev = rng.integers(0, 34, m), rng.integers(0, 34, m), rng.integers(0, 2, m), t
                f = Path(root) / split / str(d) / f"{k}.bin"
                f.parent.mkdir(parents=True, exist_ok=True)
                f.write_bytes(atis_bin(zip(*ev)))
                if split == "Train":
                    truth.append((d, ev))
    return truth


def assert_real_png(path, min_side=200, min_std=0.02):
    """The file is a PNG of a sensible size whose pixels are not all one colour; returns the image
    ``[H, W, channels]`` in [0, 1]."""
    from pathlib import Path

    from matplotlib.image import imread

    path = Path(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    img = imread(path)
    assert img.shape[0] >= min_side and img.shape[1] >= min_side, img.shape
    assert float(np.std(img[..., :3])) > min_std, f"{path} is nearly uniform"
    return img


def red_and_blue_pixels(img) -> tuple[int, int]:
    """How many pixels of an RGB(A) image are clearly red (ON events) and clearly blue (OFF)."""
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    return int(((r > 0.5) & (g < 0.3) & (b < 0.3)).sum()), int(((b > 0.5) & (g < 0.3) & (r < 0.3)).sum())


# the tiny run: TINY_NET on the tiny Fashion-MNIST folder (the ``tiny_fashion`` fixture), seconds on the CPU
# amp="none": the tiny runs compute the same on every CPU (the default, auto, is bf16 only where the CPU
# has it natively); tests/train/test_amp_cpu.py runs the default
TINY_RUN = dict(dataset="fashion-mnist", network=TINY_NET, T=2, batch_size=20, device="cpu", amp="none")


def tiny_train_config(root, out, **kw):
    """The tiny run as a TrainConfig, 3 epochs (``kw`` overrides any field)."""
    from plif.train import TrainConfig

    return TrainConfig(**{**TINY_RUN, "epochs": 3, "lr": 5e-3, "t_max": 3, "eval_batch_size": 32,
                          "data_dir": str(root), "out": str(out), **kw})


def tiny_train_argv(root, out, *extra, command="train", **kw):
    """The tiny run as a command line (``plif train``, ``plif ablate``): one flag per field of
    :data:`TINY_RUN` and of ``kw`` (``max_train_samples=100`` -> ``--max-train-samples 100``; ``True`` /
    ``False`` -> ``--compile`` / ``--no-compile``; ``None`` leaves the field to plif, e.g.
    ``network=None`` for the dataset's own network), then ``extra``."""
    from plif.train.fields import flag_name

    argv = [command]
    for name, value in {**TINY_RUN, "data_dir": str(root), "out": str(out), **kw}.items():
        if isinstance(value, bool):
            argv.append(flag_name(name) if value else flag_name("no_" + name))
        elif value is not None:
            argv += [flag_name(name), str(value)]
    return argv + [str(e) for e in extra]


def edit_stored_config(run, edit) -> None:
    """Apply ``edit`` (a function changing a dict in place) to run folder ``run``'s stored config:
    config.json and the copy in last.pt, which a resume compares (e.g. to make a run look made by an
    older plif)."""
    from plif.runs import RunFolder, load_checkpoint, save_checkpoint

    folder = RunFolder(run)
    config = json.loads(folder.config.read_text())
    edit(config)
    folder.write_config(config)
    state = load_checkpoint(folder.checkpoint("last"))
    edit(state["config"])
    save_checkpoint(folder.checkpoint("last"), state)


def shared_dir() -> Path:
    """``shared/`` beside the checkout (the parent of ``$PLIF_SHARED_DATA`` when that is set)."""
    env = os.environ.get("PLIF_SHARED_DATA")
    if env:
        return Path(env).parent
    return (Path(__file__).resolve().parents[1] / ".." / "shared").resolve()


def write_run_folder(run, config: dict, metrics=None, summary: dict | None = None, model=None,
                     checkpoint: str = "best_test", epoch: int = 3) -> Path:
    """A run folder as plif.train writes it, through plif.runs' own writers (:class:`plif.runs.RunFolder`,
    :func:`plif.runs.checkpoint.save_checkpoint`): ``config.json``, ``metrics.jsonl`` (one line per dict of
    ``metrics``, when given, even empty), ``summary.json`` (when given) and, with ``model`` (a module or
    state dict), ``checkpoints/<checkpoint>.pt`` (``checkpoint``: a name of ``plif.runs.CHECKPOINTS``)."""
    from plif.runs import RunFolder
    from plif.runs.checkpoint import save_checkpoint

    folder = RunFolder(run)
    folder.path.mkdir(parents=True, exist_ok=True)
    folder.write_config(config)
    if metrics is not None:
        folder.write_metrics(list(metrics))
    if summary is not None:
        folder.write_summary(summary)
    if model is not None:
        state = model.state_dict() if hasattr(model, "state_dict") else model
        save_checkpoint(folder.checkpoint(checkpoint), {"model": state, "epoch": epoch, "config": config})
    return folder.path


SMALL_NET = "{c8k3s1-BN-PLIF-MPk2s2}*2-DP-FC40-PLIF-DP-FC20-PLIF-APk10s10"  # on (1, 16, 16), T = 6


def small_net(spec: str = SMALL_NET, input_shape=(1, 16, 16), T: int = 6, dtype=None, seed: int = 0, **kw):
    """A small network with trained-like activity (every spiking layer fires: plif.deploy.synthetic.liven_)."""
    import torch

    from plif.deploy.synthetic import liven_
    from plif.models import build_network

    dtype = dtype or torch.float32
    torch.manual_seed(seed)
    net = build_network(spec, input_shape, T, **kw).to(dtype)
    liven_(net, torch.randn(32, *input_shape, dtype=dtype))
    return net


def save_run(run, net=None, spec: str = SMALL_NET, input_shape=(1, 16, 16), T: int = 6, dataset: str = "mnist",
             name: str = "best_test", seed: int = 0, **extra):
    """A run folder as the training code writes it (plif.runs) holding checkpoint ``name`` of ``net``
    (a new :func:`small_net` of ``spec`` when None); returns the network."""
    net = small_net(spec, input_shape, T, seed=seed) if net is None else net
    config = {"network": spec, "input_shape": list(input_shape), "T": T, "network_kwargs": {}, "dataset": dataset,
              **extra}
    write_run_folder(run, config, model=net, checkpoint=name)
    return net


def quiet(*a, **k):
    """A ``log`` that prints nothing."""


def train_killed_at_step(cfg, step: int, monkeypatch) -> None:
    """Train ``cfg`` until its ``step``-th training step (counted over the run), interrupted there
    (KeyboardInterrupt, as a kill would stop it); the step function is put back after."""
    import pytest

    from plif.train import loop as loop_mod
    from plif.train import train

    calls, real_step = {"n": 0}, loop_mod.train_step

    def dying_step(*a, **k):
        calls["n"] += 1
        if calls["n"] == step:
            raise KeyboardInterrupt
        return real_step(*a, **k)

    monkeypatch.setattr(loop_mod, "train_step", dying_step)
    with pytest.raises(KeyboardInterrupt):
        train(cfg, log=quiet)
    monkeypatch.setattr(loop_mod, "train_step", real_step)


def without_times(rows: list[dict]) -> list[dict]:
    """Metrics rows without what the clock measures (times, samples/s): what a resume reproduces."""
    return [{k: v for k, v in r.items() if "time" not in k and k != "samples_per_s"} for r in rows]


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


def write_spike_file(path, times, units, labels, time_dtype="float32", unit_dtype="uint16", skip=()):
    """A spike file in the published SHD / SSC layout, written with h5py: ``spikes/times`` and
    ``spikes/units`` (one variable-length array per sample: float seconds, channel numbers),
    ``labels`` ``[N]`` and an ``extra/keys`` the reader does not read.  ``skip``: fields left out."""
    import h5py

    with h5py.File(path, "w") as f:
        for name, rows, dt in (("spikes/times", times, time_dtype), ("spikes/units", units, unit_dtype)):
            if name in skip:
                continue
            d = f.create_dataset(name, (len(rows),), dtype=h5py.vlen_dtype(np.dtype(dt)))
            for i, r in enumerate(rows):
                d[i] = np.asarray(r, dtype=dt)
        if "labels" not in skip:
            f.create_dataset("labels", data=np.asarray(labels, dtype=np.uint16))
        f.create_dataset("extra/keys", data=np.array([b"key"] * 4))


def spike_samples(n: int, seed: int, classes: int = 20, channels: int = 700):
    """``(times, units, labels)`` of ``n`` learnable samples: class c fires channels near ``c * 35``,
    sorted times in [0, 1) s."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    times, units = [], []
    for y in labels:
        k = int(rng.integers(8, 60))
        times.append(np.sort(rng.random(k)).astype(np.float32))
        units.append(((int(y) * 35 + rng.integers(0, 35, k)) % channels).astype(np.uint16))
    return times, units, labels


def write_shd(root, train: int = 40, test: int = 12, seed: int = 0, name: str = "shd"):
    """``root`` holding ``<name>_train.h5`` and ``<name>_test.h5`` of learnable samples; returns root."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    classes = 20 if name == "shd" else 35
    write_spike_file(root / f"{name}_train.h5", *spike_samples(train, seed, classes))
    write_spike_file(root / f"{name}_test.h5", *spike_samples(test, seed + 1, classes))
    return root
