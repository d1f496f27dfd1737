import gzip
import json
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


def write_run(path, *, dataset="fashion-mnist", neuron="plif", tau0=2.0, pool=None, epochs=4, rows=(),
              network="{c128k3s1-BN-PLIF-MPk2s2}*2-DP-FC2048-PLIF-DP-FC100-PLIF-APk10s10", T=8, summary=True,
              **extra):
    """A run folder written by hand: config.json, metrics.jsonl and (optionally) summary.json."""
    path.mkdir(parents=True)
    config = {"dataset": dataset, "neuron": neuron, "tau0": tau0, "pool": pool, "epochs": epochs,
              "network": network, "T": T, "seed": 0, **extra}
    (path / "config.json").write_text(json.dumps(config))
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if summary and rows:
        best = max(rows, key=lambda m: m["test_acc"])
        (path / "summary.json").write_text(json.dumps({
            "finished": len(rows) == epochs, "epochs_run": len(rows),
            "accuracy_A": {"test_acc": best["test_acc"], "epoch": best["epoch"]}}))
    return path


def rows(test_accs, taus=None, val_accs=None, epoch_time=10.0):
    out = []
    for i, acc in enumerate(test_accs):
        r = {"epoch": i + 1, "test_acc": acc, "train_acc": acc, "epoch_time_s": epoch_time,
             "taus": taus[i] if taus else []}
        if val_accs:
            r["val_acc"] = val_accs[i]
        out.append(r)
    return out
