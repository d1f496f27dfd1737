import dataclasses
import gzip
import io
import os
import pickle
import tarfile

import numpy as np
import pytest
import torch

from plif.data import static
from plif.catalog import DATASETS, get_dataset
from plif.data.static import load_static
from local_http import serve
from plif_testing import idx_bytes


def write_mnist(folder, n=5, prefix="t10k", gz=True):
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    labels = (np.arange(n) % 10).astype(np.uint8)
    for kind, arr in (("images-idx3", images), ("labels-idx1", labels)):
        data = idx_bytes(arr)
        name = f"{prefix}-{kind}-ubyte"
        if gz:
            (folder / (name + ".gz")).write_bytes(gzip.compress(data))
        else:
            (folder / name).write_bytes(data)
    return images, labels


def cifar_batch(n, seed):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
    labels = [int(v) for v in rng.integers(0, 10, n)]
    blob = pickle.dumps({b"batch_label": b"x", b"labels": labels, b"data": data, b"filenames": [b"f"] * n})
    return blob, data, labels


def test_registry_matches_spec():
    assert {n for n, d in DATASETS.items() if not d.is_event} == {"mnist", "fashion-mnist", "cifar10"}
    assert DATASETS["mnist"].mean == (0.1307,) and DATASETS["mnist"].std == (0.3081,)
    assert DATASETS["fashion-mnist"].mean == (0.2860,) and DATASETS["fashion-mnist"].std == (0.3530,)
    c = DATASETS["cifar10"]
    assert c.mean == (0.4914, 0.4822, 0.4465) and c.std == (0.2023, 0.1994, 0.2010) and c.input_shape == (3, 32, 32)
    assert all(DATASETS[n].num_classes == 10 for n in ("mnist", "fashion-mnist", "cifar10"))


@pytest.mark.parametrize("layout", ["", "mnist", "mnist/raw", "MNIST/raw"])
@pytest.mark.parametrize("gz", [True, False])
def test_mnist_layouts(tmp_path, layout, gz):
    images, labels = write_mnist(tmp_path / layout if layout else tmp_path, gz=gz)
    x, y = load_static(get_dataset("mnist"), tmp_path, train=False, download=False)
    assert x.dtype == torch.uint8 and x.shape == (5, 1, 28, 28) and y.dtype == torch.int64
    assert torch.equal(x[:, 0], torch.from_numpy(images)) and torch.equal(y, torch.from_numpy(labels).long())


def _mirror_everything_at(monkeypatch, url):
    """Point every static dataset's mirrors at ``url`` (a local test server) instead of the internet."""
    for name, entry in list(DATASETS.items()):
        if not entry.is_event:
            monkeypatch.setitem(DATASETS, name, dataclasses.replace(entry, urls=(url + "/",)))


def test_missing_files_say_what_to_put_where(tmp_path, monkeypatch):
    with serve({}) as (url, _):  # answers 404 to everything
        _mirror_everything_at(monkeypatch, url)
        with pytest.raises(FileNotFoundError) as e:
            load_static(get_dataset("mnist"), tmp_path, train=True)
        msg = str(e.value)
        assert "train-images-idx3-ubyte.gz" in msg and "train-labels-idx1-ubyte.gz" in msg
        assert str(tmp_path) in msg and "download failed" in msg and "404" in msg
        with pytest.raises(FileNotFoundError, match="(?s)cifar-10-python.tar.gz.*cifar-10-batches-py"):
            load_static(get_dataset("cifar10"), tmp_path)
    with pytest.raises(ValueError, match="unknown static dataset 'svhn'; valid: mnist, fashion-mnist, cifar10$"):
        load_static(get_dataset("svhn", events=False), tmp_path)
    with pytest.raises(ValueError, match="unknown static dataset 'nmnist'"):  # an event dataset is refused too
        load_static(get_dataset("nmnist"), tmp_path)


def test_checksum_mismatch_is_not_written(tmp_path, monkeypatch):
    names = DATASETS["mnist"].md5
    with serve({f"/{n}": b"not the file" for n in names}) as (url, _):
        _mirror_everything_at(monkeypatch, url)
        with pytest.raises(FileNotFoundError, match="md5"):
            load_static(get_dataset("mnist"), tmp_path, train=False)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_images_labels_count_mismatch(tmp_path):
    write_mnist(tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(idx_bytes(np.zeros(4, np.uint8))))
    with pytest.raises(ValueError, match="5 images but .* 4 labels"):
        load_static(get_dataset("mnist"), tmp_path, train=False, download=False)


def test_label_out_of_range(tmp_path):
    write_mnist(tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(idx_bytes(np.array([0, 1, 12, 3, 4], np.uint8))))
    with pytest.raises(ValueError, match="label 12 at index 2"):
        load_static(get_dataset("mnist"), tmp_path, train=False, download=False)


@pytest.mark.parametrize("packed", [False, True])
def test_cifar10_batches(tmp_path, packed):
    batches = {f"data_batch_{i}": cifar_batch(3, i) for i in range(1, 6)}
    batches["test_batch"] = cifar_batch(4, 9)
    if packed:
        (tmp_path / "cifar10").mkdir()
        with tarfile.open(tmp_path / "cifar10" / "cifar-10-python.tar.gz", "w:gz") as tar:
            for name, (blob, _, _) in batches.items():
                info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
                info.size = len(blob)
                tar.addfile(info, io.BytesIO(blob))
    else:
        d = tmp_path / "cifar-10-batches-py"
        d.mkdir()
        for name, (blob, _, _) in batches.items():
            (d / name).write_bytes(blob)
    x, y = load_static(get_dataset("cifar10"), tmp_path, train=True, download=False)
    assert x.shape == (15, 3, 32, 32) and y.shape == (15,) and x.dtype == torch.uint8
    _, data1, labels1 = batches["data_batch_1"]
    # a row is 1024 red, 1024 green, 1024 blue values, each plane row-major 32x32
    assert torch.equal(x[0, 1, 0, :], torch.from_numpy(data1[0, 1024:1056]))
    assert torch.equal(x[3], torch.from_numpy(batches["data_batch_2"][1][0].reshape(3, 32, 32)))
    assert y[:3].tolist() == labels1
    xt, yt = load_static(get_dataset("cifar10"), tmp_path, train=False, download=False)
    assert xt.shape == (4, 3, 32, 32) and yt.tolist() == batches["test_batch"][2]


def test_cifar_pickle_with_code_is_refused(tmp_path):
    d = tmp_path / "cifar-10-batches-py"
    d.mkdir()
    (d / "test_batch").write_bytes(pickle.dumps({b"data": os.getcwd}))  # names a callable: must not load
    with pytest.raises(ValueError, match="test_batch: not a CIFAR-10 python batch.*refusing"):
        load_static(get_dataset("cifar10"), tmp_path, train=False, download=False)


def test_truncated_cifar_archive(tmp_path):
    blob, _, _ = cifar_batch(2, 0)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("cifar-10-batches-py/test_batch")
        info.size = len(blob)
        tar.addfile(info, io.BytesIO(blob))
    (tmp_path / "cifar-10-python.tar.gz").write_bytes(buf.getvalue()[:200])
    with pytest.raises(ValueError, match="cifar-10-python.tar.gz"):
        load_static(get_dataset("cifar10"), tmp_path, train=False, download=False)


@pytest.mark.skipif(not static.FASHION_SYSTEM_DIR.is_dir(), reason="Debian dataset-fashion-mnist not installed")
def test_real_fashion_mnist(tmp_path):
    x, y = load_static(get_dataset("fashion-mnist"), None, train=True, download=False)
    assert x.shape == (60000, 1, 28, 28) and x.dtype == torch.uint8
    assert torch.bincount(y).tolist() == [6000] * 10
    assert abs(x.float().mean().item() / 255 - DATASETS["fashion-mnist"].mean[0]) < 1e-3
    xt, yt = load_static(get_dataset("fashion-mnist"), None, train=False, download=False)
    assert xt.shape == (10000, 1, 28, 28) and torch.bincount(yt).tolist() == [1000] * 10


def test_real_mnist_test_split(shared_data):
    d = shared_data("mnist_idx")
    x, y = load_static(get_dataset("mnist"), d, train=False, download=False)
    assert x.shape == (10000, 1, 28, 28) and y[:8].tolist() == [7, 2, 1, 0, 4, 1, 4, 9]
    assert abs(x.float().mean().item() - 33.79) < 0.01
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte.gz"):
        load_static(get_dataset("mnist"), d, train=True, download=False)


def test_label_out_of_range_names_the_file_and_first_bad_index(tmp_path, shared_data):
    # a well-formed copy of the real MNIST test labels with two values that are not classes
    real = gzip.decompress((shared_data("mnist_idx") / "t10k-labels-idx1-ubyte.gz").read_bytes())
    damaged = bytearray(real)
    damaged[8 + 417] = 10
    damaged[8 + 9000] = 255
    write_mnist(tmp_path, n=10000)
    f = tmp_path / "t10k-labels-idx1-ubyte.gz"
    f.write_bytes(gzip.compress(bytes(damaged)))
    with pytest.raises(ValueError, match=rf"{f}: label 10 at index 417 \(IDX byte offset 425, after any gunzip\) "
                                         r"is outside the 10 classes 0..9 of mnist \(2 bad labels"):
        load_static(get_dataset("mnist"), tmp_path, train=False, download=False)


def test_an_empty_split_is_refused(tmp_path, capsys):
    """Valid IDX headers for 0 images (and 0 labels) pass every format check: refused by name."""
    from plif.cli.main import main
    from plif_testing import write_idx

    write_idx(tmp_path / "train-images-idx3-ubyte", np.zeros((0, 28, 28), np.uint8))
    write_idx(tmp_path / "train-labels-idx1-ubyte", np.zeros((0,), np.uint8))
    with pytest.raises(ValueError, match=r"train-images-idx3-ubyte: 0 images \(a valid header for none\): an empty "
                                         r"train split of mnist is refused"):
        load_static(get_dataset("mnist"), tmp_path, train=True, download=False)
    assert main(["data", "prepare", "mnist", "--root", str(tmp_path), "--train-only", "--no-download"]) == 2
    assert "0 images" in capsys.readouterr().err
    blob, _, _ = cifar_batch(0, 0)
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    (folder / "test_batch").write_bytes(blob)
    with pytest.raises(ValueError, match=r"cifar-10-batches-py \(test_batch\): 0 images .*: an empty test split of cifar10 is refused"):
        load_static(get_dataset("cifar10"), tmp_path, train=False, download=False)


def test_a_failed_download_names_every_file_missing(tmp_path, monkeypatch, capsys):
    """All four MNIST files are tried, the test split's too, and each one that failed is named with why."""
    from plif.cli.main import main

    with serve({}) as (url, _):  # 404 for every file
        _mirror_everything_at(monkeypatch, url)
        with pytest.raises(FileNotFoundError) as e:
            load_static(get_dataset("mnist"), tmp_path, train=True)
        msg = str(e.value)
        assert msg.startswith("mnist: missing train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
                              "t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz (download failed: ")
        for name in DATASETS["mnist"].files.values():  # why each failed, and where to fetch it by hand
            assert f"{url}/{name}: 3 attempts failed" in msg and f"\n  {url}/{name}" in msg, name
        assert main(["data", "download", "mnist", "--root", str(tmp_path)]) == 2
        assert "missing train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, " \
               "t10k-labels-idx1-ubyte.gz" in capsys.readouterr().err
