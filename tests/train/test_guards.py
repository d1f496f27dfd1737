"""Runs that cannot be corrupted: divergence, the lock, dead ends, validation before work."""
import dataclasses
import json
import os

import pytest
import torch

from plif.train import TrainConfig, train
from plif.train import session as session_mod
from plif.runs import RunFolder, RunFolderBusy, read_metrics

from plif_testing import quiet, tiny_train_argv, tiny_train_config


def _cfg(root, out, **kw):
    return tiny_train_config(root, out, **{'epochs': 1, **kw})


_quiet = quiet


def _finite(path):
    state = torch.load(path, weights_only=True)["model"]
    return all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point())


def test_huge_lr_stops_naming_the_epoch_and_keeps_the_good_checkpoints(tiny_fashion, tmp_path):
    out = tmp_path / "run"
    train(_cfg(tiny_fashion, out, epochs=1), log=_quiet)
    good = torch.load(out / "checkpoints" / "last.pt", weights_only=True)["model"]
    # the same run continued with an absurd learning rate: the weights go NaN while the loss of
    # spike rates stays finite, so only the parameter check can see it
    cfg = json.loads((out / "config.json").read_text())
    cfg["lr"] = 1e38
    (out / "config.json").write_text(json.dumps(cfg))
    state = torch.load(out / "checkpoints" / "last.pt", weights_only=True)
    state["config"]["lr"] = 1e38
    for g in state["optimizer"]["param_groups"]:
        g["lr"] = 1e38
    state["scheduler"]["base_lrs"] = [1e38]
    state["scheduler"]["_last_lr"] = [1e38]
    torch.save(state, out / "checkpoints" / "last.pt")
    with pytest.raises(FloatingPointError, match="diverged in epoch 2"):
        train(_cfg(tiny_fashion, out, epochs=2, lr=1e38), resume=True, log=_quiet)
    for name in ("last.pt", "best_test.pt"):
        assert _finite(out / "checkpoints" / name)
    after = torch.load(out / "checkpoints" / "last.pt", weights_only=True)
    assert after["epoch"] == 1 and all(torch.equal(good[k], after["model"][k]) for k in good)
    assert [m["epoch"] for m in read_metrics(out)] == [1]
    json.loads((out / "summary.json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in summary.json"))


def test_divergence_in_the_first_epoch_writes_no_weights(tiny_fashion, tmp_path):
    with pytest.raises(FloatingPointError, match="no epoch finished"):
        train(_cfg(tiny_fashion, tmp_path / "r", lr=1e38), log=_quiet)
    assert not (tmp_path / "r" / "checkpoints" / "last.pt").exists()
    assert not (tmp_path / "r" / "checkpoints" / "best_test.pt").exists()


def test_divergence_from_the_cli_is_one_line_and_non_zero(tiny_fashion, tmp_path, capsys):
    from plif.cli.main import main

    rc = main(tiny_train_argv(tiny_fashion, tmp_path / "r", epochs=1, batch_size=40, lr=1e38))
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "training diverged in epoch 1" in err


def test_read_only_file_system_is_one_line(tiny_fashion, tmp_path, monkeypatch):
    import errno
    from pathlib import Path

    def read_only(self, *a, **k):
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "mkdir", read_only)
    with pytest.raises(ValueError, match=r"--out .*/r: cannot create the run folder \(Read-only file system\)"):
        train(_cfg(tiny_fashion, tmp_path / "r"), log=_quiet)


def test_nonfinite_checkpoint_is_refused_by_eval_stats_and_export(tiny_fashion, tmp_path, capsys):
    from plif.cli.main import main

    out = tmp_path / "run"
    train(_cfg(tiny_fashion, out), log=_quiet)
    state = torch.load(out / "checkpoints" / "best_test.pt", weights_only=True)
    first = next(k for k, v in state["model"].items() if v.is_floating_point())
    state["model"][first].view(-1)[0] = float("nan")
    torch.save(state, out / "checkpoints" / "best_test.pt")
    for argv in (["eval", str(out), "--device", "cpu"], ["stats", str(out), "--random", "--samples", "4"],
                 ["export", str(out), "--nir", str(tmp_path / "x.nir")]):
        capsys.readouterr()
        assert main(argv) != 0
        err = capsys.readouterr().err
        assert "best_test.pt: 1 of" in err and "NaN or infinite" in err and "Traceback" not in err
    assert not (tmp_path / "x.nir").exists()


def test_a_second_run_in_a_locked_folder_is_refused_before_loading_data(tiny_fashion, tmp_path, monkeypatch):
    out = tmp_path / "run"
    holder = RunFolder(out)
    out.mkdir()
    holder.lock()
    loaded = []
    monkeypatch.setattr(session_mod, "load_train_data", lambda *a: loaded.append(1))
    try:
        with pytest.raises(RunFolderBusy, match=rf"in use by another plif process \(pid {os.getpid()}\)"):
            train(_cfg(tiny_fashion, out), log=_quiet)
    finally:
        holder.unlock()
    assert not loaded and not (out / "config.json").exists()


def test_the_lock_is_released_after_a_run(tiny_fashion, tmp_path):
    out = train(_cfg(tiny_fashion, tmp_path / "run"), log=_quiet)
    with RunFolder(out):  # would raise RunFolderBusy if still held
        pass


def _killed_before_its_first_epoch(out):
    """What a kill -9 during data loading leaves: config.json and an empty metrics.jsonl."""
    out.mkdir(parents=True)
    (out / "config.json").write_text("{}")
    (out / "metrics.jsonl").write_text("")


def test_a_run_with_no_finished_epoch_starts_again(tiny_fashion, tmp_path):
    out = tmp_path / "run"
    _killed_before_its_first_epoch(out)
    ckpt = out / "checkpoints"
    ckpt.mkdir()
    (ckpt / ".last.pt.abc123.tmp").write_bytes(b"x" * 1000)  # a kill during a checkpoint write
    assert train(_cfg(tiny_fashion, out), log=_quiet) == out  # a fresh start is accepted...
    assert not list(ckpt.glob(".*.tmp"))
    assert [m["epoch"] for m in read_metrics(out)] == [1]


def test_resume_of_a_run_with_no_finished_epoch_starts_it(tiny_fashion, tmp_path):
    out = tmp_path / "run"
    _killed_before_its_first_epoch(out)
    lines = []
    train(_cfg(tiny_fashion, out), resume=True, log=lines.append)  # ...and so is --resume
    assert any("finished no epoch; starting it again" in str(x) for x in lines)
    assert [m["epoch"] for m in read_metrics(out)] == [1]


@pytest.mark.parametrize("kw,message", [
    (dict(T=0), "--T must be at least 1"), (dict(T=-3), "--T must be at least 1"),
    (dict(max_train_samples=-1), "--max-train-samples must be at least 1"),
    (dict(max_test_samples=0), "--max-test-samples must be at least 1"),
    (dict(tau0=float("nan")), "--tau0 must be a finite number"), (dict(tau0=float("inf")), "--tau0 must be a finite"),
    (dict(tau0=1.0), "--tau0 must be greater than 1"), (dict(lr=float("inf")), "--lr must be a finite number"),
    (dict(lr=0.0), "--lr must be positive"), (dict(seed=-1), "--seed must be between 0 and 4294967295"),
    (dict(seed=2**70), r"--seed must be between 0 and 4294967295 \(2\^32-1\), got 1180591620717411303424"),
    (dict(tau0=1.0, neuron="lif"), "--tau0 must be greater than 1"), (dict(tau0=1e308), "at most 1e"),
    (dict(T=99_999_999_999), r"--T must be at most 2147483647 \(2\^31-1\), got 99999999999"),
    (dict(T=2**31 - 1), "--T 2147483647 with --batch-size 20: one batch of input alone is"),
    (dict(network="FC99999999999999999999"), r"out=99999999999999999999 in 'FC99999999999999999999' is more than"),
    (dict(network="FC1000000000-FC10"), "794,000,000,000 weights need"),
    (dict(surrogate="relu"), "--surrogate 'relu': unknown; valid: atan"), (dict(device="gpu"), "--device 'gpu'"),
    (dict(backend="nope"), "--backend 'nope': unknown; available: auto, reference, bptt"),
    (dict(data_dir="/nonexistent/plif-data"), "--data-dir /nonexistent/plif-data: no such folder"),
    (dict(network="c4k3s1-BN-PLIF-MPk4s4-FC1-PLIF"), r"gives outputs of shape \(1,\) per sample, but fashion-mnist "
                                                      "has 10 classes"),
    # issue 39.4: rates float32 cannot hold, and options that would have no effect, with the reason
    (dict(lr=1e-320), r"--lr 1e-320: must be a normal float32 number, 2\^-126 \(1.2e-38\) to 3.4e38: Adam's step"),
    (dict(lr=5e-324), r"--lr 5e-324: must be a normal float32 number"), (dict(lr=1e-39), "subnormal or 0"),
    (dict(lr=3.5e38), r"--lr 3.5e\+38: must be a normal float32 number.*a larger one is infinite"),
    (dict(neuron="lif", per_channel_tau=True), "--per-channel-tau has no effect with --neuron lif: only PLIF learns"),
    (dict(neuron="if", per_channel_tau=True), r"--per-channel-tau has no effect with --neuron if: .*\(IF has no tau\)"),
    (dict(neuron="if", tau0=3.0), "--tau0 3 has no effect with --neuron if: IF integrates without a leak"),
    (dict(max_val_samples=10), r"--max-val-samples 10 has no effect without --val-split: no validation split"),
    (dict(authors_code=True), "--authors-code has no effect here: .* the dataset's paper network is the authors'"),
    (dict(authors_code=True, dataset="cifar10"), "--authors-code has no effect here: .* --preset cpu trains the"),
    (dict(network="c4k3s1-PLIF-MPk4s4-FC100-PLIF-APk10s10", bn_per_step=True),
     "--bn-per-step has no effect: the network 'c4k3s1-PLIF-MPk4s4-FC100-PLIF-APk10s10' has no BatchNorm"),
    (dict(network="FC100-PLIF-APk10s10", checkpoint_blocks=True), "--checkpoint-blocks has no effect: the network "
                                                                  "'FC100-PLIF-APk10s10' has no convolutional block"),
    (dict(network="c4k3s1-BN-PLIF-FC100-PLIF-APk10s10", checkpoint_blocks=True), "--checkpoint-blocks has no effect"),
])
def test_bad_values_are_refused_before_any_work(kw, message, tiny_fashion, tmp_path, monkeypatch):
    monkeypatch.setattr(session_mod, "load_train_data", lambda *a: pytest.fail("data loaded before validation"))
    with pytest.raises(ValueError, match=message):
        train(_cfg(tiny_fashion, tmp_path / "r", **kw), log=_quiet)
    assert not (tmp_path / "r").exists()  # nothing written: no stub run folder


def test_cpu_preset_cosine_period_follows_epochs():
    from plif.train import resolve_config

    assert resolve_config(TrainConfig(epochs=3)).t_max == 3
    assert resolve_config(TrainConfig()).t_max == 2
    assert resolve_config(TrainConfig(epochs=3, t_max=5)).t_max == 5
    assert resolve_config(TrainConfig(preset="paper", epochs=3)).t_max == 64


@pytest.mark.parametrize("where", ["file", "under_file", "read_only"])
def test_unusable_out_is_one_line_before_data(where, tiny_fashion, tmp_path, monkeypatch):
    (tmp_path / "f").write_text("x")
    out = {"file": tmp_path / "f", "under_file": tmp_path / "f" / "run", "read_only": tmp_path / "ro" / "run"}[where]
    if where == "read_only":
        (tmp_path / "ro").mkdir()
        os.chmod(tmp_path / "ro", 0o555)
        if os.access(tmp_path / "ro", os.W_OK):
            pytest.skip("running as root: permissions are not enforced")
    monkeypatch.setattr(session_mod, "load_train_data", lambda *a: pytest.fail("data loaded before --out was checked"))
    with pytest.raises(ValueError) as e:
        train(_cfg(tiny_fashion, out), log=_quiet)
    assert str(e.value).startswith(f"--out {out}") and "\n" not in str(e.value)
    assert (tmp_path / "f").read_text() == "x"


def test_full_disk_is_one_line_naming_the_path(tiny_fashion, tmp_path, monkeypatch, capsys):
    from plif.cli.main import main

    def full(path, data):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(session_mod.RunFolder, "write_config",
                        lambda self, d: full(self.config, b""))
    rc = main(tiny_train_argv(tiny_fashion, tmp_path / "r", epochs=1))
    err = capsys.readouterr().err.strip()
    assert rc != 0 and "\n" not in err and "Traceback" not in err
    assert "No space left on device" in err and str(tmp_path / "r" / "config.json") in err


def test_summary_is_valid_json_and_max_test_samples_leaves_validation_alone(tiny_fashion, tmp_path):
    lines = []
    out = train(_cfg(tiny_fashion, tmp_path / "r", val_split=0.5, max_test_samples=10), log=lines.append)
    json.loads((out / "summary.json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in summary.json"))
    assert ", 100 val, 10 test samples" in lines[1]
    lines.clear()
    train(_cfg(tiny_fashion, tmp_path / "r2", val_split=0.5, max_test_samples=10, max_val_samples=7), log=lines.append)
    assert ", 7 val, 10 test samples" in lines[1]


def test_all_finite_sees_nan_and_inf_in_any_tensor():
    from plif.train.loop import all_finite

    good = [torch.ones(3), torch.zeros(2, 2), torch.arange(4)]
    assert bool(all_finite(good))
    for bad in (float("nan"), float("inf"), -float("inf")):
        t = torch.ones(5)
        t[3] = bad
        assert not bool(all_finite(good + [t]))
    both = torch.tensor([1.0, float("inf"), -float("inf")])  # a sum would be NaN, a norm inf: seen either way
    assert not bool(all_finite(good + [both])) and not bool(all_finite([both.to(torch.float64)]))
    assert bool(all_finite([torch.tensor([1e20, -1e20, 3.0])]))  # large but finite (its squares overflow fp32)


def test_divergence_is_seen_before_the_end_of_a_long_epoch():
    from plif.train.loop import Diverged, train_epoch

    net = torch.nn.Sequential(torch.nn.Linear(4, 10))
    opt = torch.optim.SGD(net.parameters(), lr=1.0)
    seen = []

    def batches():
        for i in range(100):
            seen.append(i)
            yield torch.rand(3, 4) * 1e30, torch.randint(0, 10, (3,))

    class Wrap(torch.nn.Module):  # [B, 4] -> [T=1, B, 10]
        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, x):
            return self.net(x).unsqueeze(0)

    with pytest.raises(Diverged):
        train_epoch(Wrap(), opt, batches(), 10, check_every=4)
    assert len(seen) < 100


def test_a_batch_larger_than_the_training_set_is_refused_before_training(tiny_fashion, tmp_path):
    with pytest.raises(ValueError, match="--batch-size 500: larger than the 200 training samples; lower --batch-size"):
        train(_cfg(tiny_fashion, tmp_path / "r", batch_size=500), log=_quiet)


def test_a_second_plif_train_process_is_refused_with_the_holders_pid(tiny_fashion, tmp_path):
    """Two real processes: the holder is a child that takes the lock and waits."""
    import subprocess
    import sys
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src"
    out = tmp_path / "run"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from plif.runs import RunFolder; "
                               f"RunFolder({str(out)!r}).lock(); print('locked', flush=True); sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "locked"
        r = subprocess.run([sys.executable, "-m", "plif", *tiny_train_argv(tiny_fashion, out, epochs=1)],
                           capture_output=True, text=True, env=env, timeout=120)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert r.returncode == 2
    assert r.stderr.strip() == (f"plif train: error: {out} is in use by another plif process (pid {holder.pid}); "
                                "wait for it to finish or choose another --out")
    assert not (out / "config.json").exists()


def test_the_folder_state_is_read_under_the_lock(tiny_fashion, tmp_path, monkeypatch):
    """A run that finishes while a second one waits to lock must not be cleared as 'unfinished'."""
    out = tmp_path / "run"
    real_lock = RunFolder.lock

    def lock_after_another_run_finished(self):
        monkeypatch.setattr(RunFolder, "lock", real_lock)
        train(_cfg(tiny_fashion, out), log=_quiet)  # the other run, finishing before we get the lock
        return real_lock(self)

    monkeypatch.setattr(RunFolder, "lock", lock_after_another_run_finished)
    with pytest.raises(ValueError, match="already holds a run"):
        train(_cfg(tiny_fashion, out), log=_quiet)
    assert [m["epoch"] for m in read_metrics(out)] == [1] and (out / "checkpoints" / "last.pt").is_file()


def test_a_stored_config_is_read_with_what_it_ran_with(tiny_fashion):
    """Options refused for having no effect (issue 39.4) are refused when asked for, not in a run made
    before: plif eval, stats, export and --resume read such a run's config as it is."""
    from plif.train.config import check_stored, resolve_config

    stored = resolve_config(TrainConfig(neuron="lif", per_channel_tau=True, max_val_samples=5, device="cpu",
                                        lr=1e-40, data_dir=str(tiny_fashion)), asked=False)
    check_stored(stored.to_dict(), "config.json")  # a subnormal lr, refused since, too
    with pytest.raises(ValueError, match="--lr 1e-40: must be a normal float32 number"):
        resolve_config(stored)
    with pytest.raises(ValueError, match="--per-channel-tau has no effect with --neuron lif"):
        resolve_config(dataclasses.replace(stored, lr=1e-3))
