"""--max-train-samples caps the pool --val-split is taken from; a too-large batch is refused from the file list."""
import re

import pytest
import torch

from plif.train import TrainConfig, train
from plif.data.pipeline import Split, cap_and_split


def test_validation_is_sized_from_the_capped_pool():
    labels = torch.arange(60_000) % 10
    cfg = TrainConfig(max_train_samples=3072, val_split=0.15)
    tr, va = cap_and_split(Split(labels, labels), cfg.data_options())
    assert len(tr) + len(va) == 3072 and len(va) == 460  # 46 of each class of the 3072, not 9000
    assert set(tr.rows.tolist()).isdisjoint(va.rows.tolist())
    per_class = torch.bincount(torch.cat([tr.y, va.y]), minlength=10)  # the cap is a stratified subset
    assert per_class.min() >= 307 and per_class.max() <= 308
    tr, va = cap_and_split(Split(labels, labels), TrainConfig(max_train_samples=3072, val_split=0.15, max_val_samples=100).data_options())
    assert len(tr) == 3072 - 460 and len(va) == 100
    tr, va = cap_and_split(Split(labels, labels), TrainConfig(max_train_samples=500).data_options())
    assert len(tr) == 500 and va is None


def test_the_run_prints_what_it_used(tiny_fashion, tmp_path):
    from plif_testing import tiny_train_config

    lines = []
    train(tiny_train_config(tiny_fashion, tmp_path / "r", epochs=1, batch_size=40, max_train_samples=100, val_split=0.2,
                            max_test_samples=20), log=lines.append)
    m = re.search(r"fashion-mnist: (\d+) train, (\d+) val \(--max-train-samples 100 caps the pool --val-split is "
                  r"taken from\), 20 test samples", lines[1])
    assert m and int(m[1]) + int(m[2]) == 100 and 15 <= int(m[2]) <= 25


def test_batch_larger_than_an_event_split_is_refused_before_any_frame_cache(tmp_path, monkeypatch):
    from plif_testing import tiny_train_config

    monkeypatch.setenv("PLIF_DATA_ROOT", str(tmp_path / "root"))
    for split in ("Train", "Test"):
        for d in range(10):
            for k in range(3):
                f = tmp_path / "nm" / split / str(d) / f"{k}.bin"
                f.parent.mkdir(parents=True, exist_ok=True)
                f.write_bytes(bytes([1, 2, 0x80, 0, k + 1]))
    cfg = tiny_train_config(tmp_path / "nm", tmp_path / "run", dataset="nmnist", network=None, batch_size=64)
    with pytest.raises(ValueError, match="--batch-size 64: larger than the 30 training samples; lower --batch-size"):
        train(cfg, log=lambda *a: None)
    assert not (tmp_path / "root").exists() and not (tmp_path / "run").exists()  # no frame cache, no run folder
