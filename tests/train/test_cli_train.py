import json

import pytest

from plif.cli.main import main
from plif.runs import read_metrics
from plif_testing import tiny_train_argv


def _args(root, out, *extra):
    return tiny_train_argv(root, out, *extra)


def test_resume_needs_only_the_run_folder(tiny_fashion, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(_args(tiny_fashion, out, "--epochs", "1", "--lr", "0.004", "--val-split", "0.2")) == 0
    # no other flag: the run's own config is used, so nothing differs; --epochs may grow
    assert main(["train", "--resume", str(out), "--epochs", "2"]) == 0
    assert [m["epoch"] for m in read_metrics(out)] == [1, 2]
    config = json.loads((out / "config.json").read_text())
    assert config["lr"] == 0.004 and config["epochs"] == 2  # the resumed run's epochs are recorded
    # the cosine period followed --epochs (1): it follows the new 2 instead of training epoch 2 at lr 0 (issue 31)
    assert config["t_max"] == 2 and read_metrics(out)[1]["lr"] == pytest.approx(0.002)
    assert "the cosine period follows the epochs, now 2" in capsys.readouterr().out
    capsys.readouterr()
    assert main(["train", "--resume", str(out), "--epochs", "3", "--lr", "0.1"]) == 2
    err = capsys.readouterr().err
    assert "different config" in err and "lr: run has 0.004, now 0.1" in err


def test_resume_of_a_folder_without_a_run(tmp_path, capsys):
    assert main(["train", "--resume", str(tmp_path)]) == 2
    assert "config.json" in capsys.readouterr().err


def test_eval_prints_accuracy_a_and_b(tiny_fashion, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(_args(tiny_fashion, out, "--epochs", "2", "--val-split", "0.2")) == 0
    summary = json.loads((out / "summary.json").read_text())
    capsys.readouterr()
    assert main(["eval", str(out), "--device", "cpu"]) == 0
    printed = capsys.readouterr().out
    assert f"accuracy A: {summary['accuracy_A']['test_acc']:.2%}" in printed
    assert f"accuracy B: {summary['accuracy_B']['test_acc']:.2%}" in printed
