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


def test_options_given_to_a_resume_are_refused_where_they_would_do_nothing(tiny_fashion, tmp_path, capsys):
    """--checkpoint-blocks on a network without a conv block, --per-channel-tau with LIF: given to a resume,
    refused with the reason as for a new run (they were accepted in silence); the run's own options stay."""
    out = tmp_path / "run"
    assert main(_args(tiny_fashion, out, "--epochs", "1", "--network", "FC100-LIF-APk10s10", "--neuron", "lif")) == 0
    for option, why in (("--checkpoint-blocks", "--checkpoint-blocks has no effect: the network"),
                        ("--per-channel-tau", "--per-channel-tau has no effect with --neuron lif")):
        assert main(["train", "--resume", str(out), "--epochs", "2", option]) == 2
        assert why in capsys.readouterr().err
    assert [m["epoch"] for m in read_metrics(out)] == [1]
    assert main(["train", "--resume", str(out), "--epochs", "2", "--no-checkpoint-blocks"]) == 0


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


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGUSR1"])
def test_eval_stopped_by_a_signal_says_so_and_exits_128_plus_its_number(sig, tiny_fashion, tmp_path, monkeypatch,
                                                                        capsys):
    """SIGTERM and SIGUSR1 (a cluster's notice) ended plif eval without a word (issue 31)."""
    import os
    import signal
    import time

    from plif.models import build_network
    from plif.train import resolve_config
    from plif.train import loop
    from plif_testing import tiny_train_config, write_run_folder

    cfg = resolve_config(tiny_train_config(tiny_fashion, tmp_path / "run"))
    net = build_network(cfg.network, cfg.input_shape, cfg.T, **cfg.network_kwargs())
    write_run_folder(tmp_path / "run", cfg.to_dict(), model=net)
    signum = getattr(signal, sig)

    def evaluate(*a, **k):
        os.kill(os.getpid(), signum)
        time.sleep(30)  # the handler interrupts it
        raise AssertionError("the signal was not handled")

    def unhandled(*a):  # what would otherwise end the whole test session
        raise AssertionError(f"plif eval left {sig} unhandled")

    monkeypatch.setattr(loop, "evaluate", evaluate)
    before = signal.signal(signum, unhandled)
    try:
        assert main(["eval", str(tmp_path / "run"), "--device", "cpu"]) == 128 + signum
        assert signal.getsignal(signum) is unhandled  # plif's handler was for the command only
    finally:
        signal.signal(signum, before)
    assert f"plif eval: stopped by {sig} before it finished" in capsys.readouterr().err


@pytest.mark.parametrize("native", [True, False])
def test_eval_runs_a_bf16_run_in_bf16_where_native_and_says_which(native, tiny_fashion, tmp_path, capsys,
                                                                   monkeypatch):
    """plif eval runs in the run's precision where this CPU has it natively (bf16 is emulated elsewhere,
    slower than fp32): then accuracy A is the one the run recorded; else fp32, the line saying why."""
    import torch

    from plif.layers import precision
    from plif.train import loop

    out = tmp_path / "run"
    assert main(_args(tiny_fashion, out, "--epochs", "1", "--amp", "bf16", "--max-test-samples", "40")) == 0
    summary = json.loads((out / "summary.json").read_text())
    monkeypatch.setattr(precision, "native_bf16", lambda: native)
    seen = []
    real = loop.evaluate
    monkeypatch.setattr(loop, "evaluate", lambda *a, **k: seen.append(torch.is_autocast_enabled("cpu")) or real(*a, **k))
    capsys.readouterr()
    assert main(["eval", str(out), "--device", "cpu"]) == 0
    printed = capsys.readouterr().out
    assert seen == [native]
    if native:
        assert "precision: bf16 autocast, as the run trained" in printed
        assert f"accuracy A: {summary['accuracy_A']['test_acc']:.2%}" in printed
    else:
        assert "precision: fp32, not the run's bf16: this CPU has no native bf16" in printed
