"""``plif train --dataset shd`` on spike files in the published SHD layout (written here with h5py):
the whole pipeline (list, integrate, cache, train, evaluate, save) and an exact resume."""
import json

import pytest
import torch

pytest.importorskip("h5py")

from plif_testing import quiet, train_killed_at_step, without_times, write_shd  # noqa: E402

from plif.cli.main import main  # noqa: E402
from plif.runs import read_metrics  # noqa: E402
from plif.train import TrainConfig, train  # noqa: E402


def _cfg(root, out, **kw):
    return TrainConfig(**{"dataset": "shd", "data_dir": str(root), "out": str(out), "epochs": 2, "T": 4,
                          "batch_size": 10, "device": "cpu", "amp": "none", **kw})


def test_plif_train_dataset_shd_runs_one_epoch_end_to_end(tmp_path, monkeypatch):
    root = write_shd(tmp_path / "data", train=40, test=12)
    monkeypatch.setenv("PLIF_DATA_ROOT", str(tmp_path / "cache"))
    out = tmp_path / "run"
    assert main(["train", "--dataset", "shd", "--data-dir", str(root), "--epochs", "1", "--device", "cpu",
                 "--amp", "none", "--batch-size", "10", "--out", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["network"] == "FC64-BN-PLIF-FC20-PLIF" and config["input_shape"] == [700]  # the cpu preset
    (m,) = read_metrics(out)
    assert m["epoch"] == 1 and 0.0 <= m["test_acc"] <= 1.0
    caches = sorted(p.name for p in (tmp_path / "cache" / "frames").iterdir())
    assert [c.rsplit("-", 1)[0] for c in caches] == ["shd-test-T4-time", "shd-train-T4-time"]  # the record's slicing


def test_a_killed_shd_run_resumes_bit_for_bit(tmp_path, monkeypatch):
    root = write_shd(tmp_path / "data", train=40, test=12)
    monkeypatch.setenv("PLIF_DATA_ROOT", str(tmp_path / "cache"))
    full = train(_cfg(root, tmp_path / "full"), log=quiet)
    train_killed_at_step(_cfg(root, tmp_path / "killed"), 6, monkeypatch)  # mid-way through epoch 2 (4 steps each)
    resumed = train(_cfg(root, tmp_path / "killed"), resume=True, log=quiet)
    assert without_times(read_metrics(resumed)) == without_times(read_metrics(full))
    a = torch.load(full / "checkpoints" / "last.pt", weights_only=True)["model"]
    b = torch.load(resumed / "checkpoints" / "last.pt", weights_only=True)["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
