import json
import math

import pytest
import torch

from plif.runs import load_run, read_metrics
from plif.train import TrainConfig, train
from plif.train.summary import run_summary

from plif_testing import TINY_NET, quiet, tiny_train_config, train_killed_at_step, without_times


_cfg = tiny_train_config


_quiet = quiet


def test_tiny_run_writes_a_complete_run_folder(tiny_fashion, tmp_path):
    run = train(_cfg(tiny_fashion, tmp_path / "run", val_split=0.15), log=_quiet)
    metrics = read_metrics(run)
    assert [m["epoch"] for m in metrics] == [1, 2, 3]
    for key in ("train_loss", "train_acc", "test_acc", "val_acc", "lr", "taus", "epoch_time_s", "samples_per_s"):
        assert key in metrics[0]
    assert len(metrics[0]["taus"]) == 2
    assert metrics[0]["lr"] == pytest.approx(5e-3) and metrics[1]["lr"] < metrics[0]["lr"]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["finished"] and summary["epochs_run"] == 3
    assert summary["accuracy_A"]["test_acc"] == max(m["test_acc"] for m in metrics)
    best_val = max(metrics, key=lambda m: (m["val_acc"], -m["epoch"]))
    assert summary["accuracy_B"]["epoch"] == best_val["epoch"]
    assert summary["accuracy_B"]["test_acc"] == best_val["test_acc"]
    config = json.loads((run / "config.json").read_text())
    assert config["network"] == TINY_NET and config["T"] == 2
    net, _ = load_run(run, "best_test")
    state = torch.load(run / "checkpoints" / "best_test.pt", weights_only=True)
    assert state["epoch"] == summary["accuracy_A"]["epoch"]
    assert all(torch.equal(a, b) for a, b in zip(net.state_dict().values(), state["model"].values()))
    assert max(m["train_acc"] for m in metrics) > 0.3  # learns the bars (chance is 0.1)


def test_a_run_of_short_epochs_saves_batchnorm_statistics_re_estimated_on_the_training_split(tiny_fashion, tmp_path):
    """8 steps an epoch leave 43 % of BatchNorm's previous running statistics in them: a tiny run
    tested at chance (issue 32).  They are re-estimated before the epoch is evaluated and saved."""
    from plif.data.pipeline import load_train_data
    from plif.train import resolve_config
    from plif.train.precise_bn import reestimate_bn

    cfg = _cfg(tiny_fashion, tmp_path / "run", epochs=1)
    lines = []
    run = train(cfg, log=lines.append)
    assert read_metrics(run)[0]["bn_reestimated"]
    assert sum(line.startswith("precise BN: ") for line in lines) == 1
    assert next(line for line in lines if line.startswith("precise BN: ")).endswith("evaluated and saved")
    net, _ = load_run(run, "last")
    saved = {k: v.clone() for k, v in net.state_dict().items() if "running" in k}
    data = load_train_data(resolve_config(cfg).data_options(), torch.device("cpu"))
    reestimate_bn(net, data.eval_batches(data.train, cfg.eval_batch_size))
    assert saved and all(torch.equal(v, net.state_dict()[k]) for k, v in saved.items())


def test_protocol_b_bookkeeping(tmp_path):
    rows = [
        {"epoch": 1, "test_acc": 0.50, "val_acc": 0.40, "taus": [2.0], "epoch_time_s": 1.0},
        {"epoch": 2, "test_acc": 0.70, "val_acc": 0.65, "taus": [2.0], "epoch_time_s": 1.0},
        {"epoch": 3, "test_acc": 0.75, "val_acc": 0.60, "taus": [2.0], "epoch_time_s": 1.0},
        {"epoch": 4, "test_acc": 0.72, "val_acc": 0.65, "taus": [2.0], "epoch_time_s": 1.0},
    ]
    cfg = TrainConfig(val_split=0.15, epochs=4)
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "best_test.pt").write_bytes(b"")
    s = run_summary(rows, cfg, tmp_path, True)
    assert s["accuracy_A"] == {"test_acc": 0.75, "epoch": 3, "checkpoint": "checkpoints/best_test.pt"}
    assert s["accuracy_B"]["checkpoint"] is None  # never points at a checkpoint that was not written
    # ties in validation accuracy go to the earliest epoch, as the checkpoint on disk does
    assert s["accuracy_B"]["epoch"] == 2 and s["accuracy_B"]["test_acc"] == 0.70
    assert "accuracy_B" not in run_summary(rows, TrainConfig(epochs=4), tmp_path, True)


_strip = without_times


def test_kill_and_resume_is_exact(tiny_fashion, tmp_path, monkeypatch):
    full = train(_cfg(tiny_fashion, tmp_path / "full"), log=_quiet)
    train_killed_at_step(_cfg(tiny_fashion, tmp_path / "killed"), 14, monkeypatch)  # mid-way through epoch 2 (8 steps an epoch)
    assert torch.load(tmp_path / "killed" / "checkpoints" / "last.pt", weights_only=True)["epoch"] == 1
    resumed = train(_cfg(tiny_fashion, tmp_path / "killed"), resume=True, log=_quiet)

    assert _strip(read_metrics(resumed)) == _strip(read_metrics(full))
    a = torch.load(full / "checkpoints" / "last.pt", weights_only=True)["model"]
    b = torch.load(resumed / "checkpoints" / "last.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_resume_with_different_config_refuses(tiny_fashion, tmp_path):
    train(_cfg(tiny_fashion, tmp_path / "r", epochs=1), log=_quiet)
    with pytest.raises(ValueError, match=r"different config:\n  lr: run has 0.005, now 0.001"):
        train(_cfg(tiny_fashion, tmp_path / "r", epochs=2, lr=1e-3), resume=True, log=_quiet)
    with pytest.raises(ValueError, match="already holds a run"):
        train(_cfg(tiny_fashion, tmp_path / "r"), log=_quiet)


def test_nan_loss_stops_and_keeps_last_good_checkpoint(tiny_fashion, tmp_path, monkeypatch):
    from plif.train import loss as loss_mod

    real = loss_mod.rate_mse_loss
    state = {"epoch_steps": 0}

    def poisoned(out, y, c):
        loss, rate = real(out, y, c)
        state["epoch_steps"] += 1
        return (loss * math.nan if state["epoch_steps"] > 12 else loss), rate

    monkeypatch.setattr(loss_mod, "rate_mse_loss", poisoned)  # the run's Loss (plif.train.loss) calls it
    with pytest.raises(FloatingPointError, match="epoch 2"):
        train(_cfg(tiny_fashion, tmp_path / "nan"), log=_quiet)
    last = torch.load(tmp_path / "nan" / "checkpoints" / "last.pt", weights_only=True)
    assert last["epoch"] == 1
    assert all(torch.isfinite(v).all() for v in last["model"].values() if v.is_floating_point())


@pytest.mark.parametrize("field,value,valid", [
    ("dataset", "imagenet", "fashion-mnist"), ("preset", "fast", "paper"), ("neuron", "hh", "plif"),
])
def test_bad_names_list_valid_ones(field, value, valid, tmp_path):
    with pytest.raises(ValueError, match=valid):
        train(_cfg(tmp_path, tmp_path / "x", **{field: value}), log=_quiet)


def test_missing_data_says_where(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        train(_cfg(tmp_path, tmp_path / "x", dataset="cifar10", network=None), log=_quiet)
    assert "cifar-10" in str(e.value)
