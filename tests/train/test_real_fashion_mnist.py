from pathlib import Path

import pytest

from plif.runs import read_metrics
from plif.train import TrainConfig, train

FMNIST = Path("/usr/share/datasets/fashion-mnist")


@pytest.mark.slow
@pytest.mark.skipif(not (FMNIST / "train-images-idx3-ubyte.gz").is_file(), reason="dataset-fashion-mnist not installed")
def test_short_run_on_real_fashion_mnist(tmp_path):
    cfg = TrainConfig(epochs=1, max_train_samples=3200, max_test_samples=500, out=str(tmp_path / "run"), device="cpu")
    run = train(cfg, log=lambda *a: None)
    (row,) = read_metrics(run)
    assert row["test_acc"] > 0.5  # 50 steps of the default network; chance is 0.1
