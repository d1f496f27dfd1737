"""Stopping on purpose and continuing: --time-limit, SIGUSR1/SIGTERM, --checkpoint-every."""
import json
import os
import signal

import pytest
import torch

from plif.cli.main import main
from plif.runs import read_metrics
from plif.train import train
from plif.train import loop as loop_mod
from plif.train.run import EXIT_STOPPED, train_status
from plif.train.stopping import parse_duration
from plif_testing import quiet, tiny_train_argv, tiny_train_config


def _strip(rows):
    return [{k: v for k, v in r.items() if "time" not in k and k != "samples_per_s"} for r in rows]


def _same_weights(a, b):
    a = torch.load(a / "checkpoints" / "last.pt", weights_only=True)
    b = torch.load(b / "checkpoints" / "last.pt", weights_only=True)
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert a["epoch"] == b["epoch"] and b.get("step", 0) == 0


@pytest.mark.parametrize("text, seconds", [("90", 90), ("45s", 45), ("90m", 5400), ("1.5h", 5400), ("1h30m", 5400),
                                           ("1:30:00", 5400), ("05:00", 300), ("90:00", 5400), ("1-00:00:00", 86400),
                                           ("2d", 172800), ("1-12", 129600), ("1-12:30", 131400), ("30:59:59", 111599)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "-5", "1x", "h", "nan", "1:2:3:4"])
def test_parse_duration_refuses(text):
    with pytest.raises(ValueError, match="--time-limit"):
        parse_duration(text)


@pytest.mark.parametrize("text, field", [("1:99:99", "minutes"), ("1:00:60", "seconds"), ("5:60", "seconds"),
                                         ("1-24:00:00", "hours"), ("1-01:60", "minutes")])
def test_parse_duration_refuses_a_clock_field_out_of_range(text, field):
    """1:99:99 was read as 9,639 s (issue 31); SLURM's D-HH was read as D days and HH seconds."""
    with pytest.raises(ValueError, match=f"--time-limit '{text}': {field} must be below"):
        parse_duration(text)


def test_deadline_counts_from_the_start_of_the_process():
    import time

    from plif.train.stopping import Stopper, job_age

    age = job_age()
    assert age > 0.1  # this pytest process has run for a while
    stopper = Stopper(3600.0, signals=False)
    assert stopper.deadline == pytest.approx(time.monotonic() - age + 3600.0, abs=1.0)


def test_time_limit_stops_after_an_epoch_and_the_same_command_continues(tiny_fashion, tmp_path, capsys,
                                                                        monkeypatch):
    assert main(tiny_train_argv(tiny_fashion, tmp_path / "full", epochs=2)) == 0
    limited = tiny_train_argv(tiny_fashion, tmp_path / "run", epochs=2, time_limit="0.001")
    assert main(limited) == EXIT_STOPPED  # the first epoch always runs; the second does not fit
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["stopped"] == "time limit" and not summary["finished"] and summary["epochs_run"] == 1
    assert "exit status 75" in capsys.readouterr().out
    with monkeypatch.context() as m:  # torchrun --max-restarts starts the group again after that exit 75
        m.setenv("TORCHELASTIC_RESTART_COUNT", "1")
        assert main(limited) == EXIT_STOPPED  # past the limit: stops at once, trains nothing more
    assert len(read_metrics(tmp_path / "run")) == 1 and "stopped (time limit)" in capsys.readouterr().out
    assert main(limited) == 0  # the same command, no --resume: continues and finishes
    assert _strip(read_metrics(tmp_path / "run")) == _strip(read_metrics(tmp_path / "full"))
    _same_weights(tmp_path / "full", tmp_path / "run")
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["finished"]


def test_signal_stops_at_a_step_checkpoint_and_resume_continues_at_the_same_batch(tiny_fashion, tmp_path,
                                                                                   monkeypatch):
    """SIGUSR1 in the first epoch: the run stops at the next --checkpoint-every step (nothing of the
    epoch finished yet); the resume goes on at the same batch with the same RNG states and partial
    totals, and ends bit for bit where an uninterrupted run without step checkpoints does."""
    full = train(tiny_train_config(tiny_fashion, tmp_path / "full", epochs=2), log=quiet)
    real, calls = loop_mod.train_step, []

    def step(*a, **k):
        calls.append(1)
        if len(calls) == 4:
            os.kill(os.getpid(), signal.SIGUSR1)
        return real(*a, **k)

    monkeypatch.setattr(loop_mod, "train_step", step)
    cfg = tiny_train_config(tiny_fashion, tmp_path / "run", epochs=2, checkpoint_every=3)
    path, stopped = train_status(cfg, log=quiet)
    assert stopped == "SIGUSR1" and len(calls) == 6
    state = torch.load(path / "checkpoints" / "last.pt", weights_only=True)
    assert (state["epoch"], state["step"], len(state["ranks"])) == (0, 6, 1)
    assert read_metrics(path) == []
    monkeypatch.setattr(loop_mod, "train_step", real)
    lines = []
    assert train_status(cfg, resume=True, log=lines.append) == (path, None)
    assert any("at step 6 of epoch 1" in str(line) for line in lines)
    assert _strip(read_metrics(path)) == _strip(read_metrics(full))
    _same_weights(full, path)


def test_checkpoint_every_option_checks(tiny_fashion, tmp_path):
    with pytest.raises(ValueError, match="--checkpoint-every must be at least 1"):
        train(tiny_train_config(tiny_fashion, tmp_path / "r", checkpoint_every=0), log=quiet)
    with pytest.raises(ValueError, match="--time-limit '2x'"):
        train(tiny_train_config(tiny_fashion, tmp_path / "r", time_limit="2x"), log=quiet)


def test_step_checkpoint_never_saves_diverged_weights(tiny_fashion, tmp_path, monkeypatch):
    """Epoch 1 is 10 steps and 2 evaluation batches; the loss is NaN from epoch 2's step 5: its
    step-4 checkpoint is the last written (the step-6 one is refused) and the run stops naming epoch 2."""
    import math

    from plif.train import loss as loss_mod

    real, calls = loss_mod.rate_mse_loss, []

    def poisoned(out, y, c):
        loss, rate = real(out, y, c)
        calls.append(1)
        return (loss * math.nan if len(calls) > 16 else loss), rate

    monkeypatch.setattr(loss_mod, "rate_mse_loss", poisoned)  # the run's Loss (plif.train.loss) calls it
    with pytest.raises(FloatingPointError, match="epoch 2"):
        train(tiny_train_config(tiny_fashion, tmp_path / "nan", checkpoint_every=2), log=quiet)
    last = torch.load(tmp_path / "nan" / "checkpoints" / "last.pt", weights_only=True)
    assert last["epoch"] == 1 and last["step"] == 4  # epoch 2's step-4 checkpoint, before the NaN
    assert all(torch.isfinite(v).all() for v in last["model"].values() if v.is_floating_point())
