"""Nothing a finished epoch left is lost: damaged run folders are resumed or refused, never wiped;
no write goes through a planted link; a full disk names the file; a refusal leaves no stub."""
import errno
import hashlib
import json
import os
import shutil

import pytest
import torch

from plif.models import build_network
from plif.train import train
from plif.train import epochs as epochs_mod, session as session_mod
from plif.runs import RunFolder, read_metrics

from plif_testing import TINY_NET, quiet, tiny_train_config


@pytest.fixture(scope="module")
def finished(tiny_fashion, tmp_path_factory):
    """A run that finished 2 of 3 epochs (as if killed between them)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    train(tiny_train_config(tiny_fashion, out, epochs=2, t_max=3), log=quiet)
    return out


def _copy(finished, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(finished, out)
    return out


def _snapshot(folder):
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != ".lock"}


def _resume(tiny_fashion, out, lines=None, **kw):
    return train(tiny_train_config(tiny_fashion, out, epochs=3, t_max=3, **kw), resume=True,
                 log=(lines.append if lines is not None else quiet))


@pytest.mark.parametrize("damage", ["garbled", "empty", "deleted", "short", "not-utf8"])
def test_a_damaged_metrics_file_is_rebuilt_from_last_pt_not_wiped(damage, finished, tiny_fashion, tmp_path):
    out = _copy(finished, tmp_path)
    m = out / "metrics.jsonl"
    if damage == "garbled":
        m.write_text("{not json\n")
    elif damage == "empty":
        m.write_text("")
    elif damage == "deleted":
        m.unlink()
    elif damage == "short":
        m.write_text(m.read_text().splitlines()[0] + "\n")
    else:
        m.write_bytes(b"\xff\xfe" * 20)
    lines = []
    _resume(tiny_fashion, out, lines)
    text = "\n".join(map(str, lines))
    assert "starting it again" not in text and "resuming" in text and "after epoch 2" in text
    assert "rewrote it from the copy in" in text
    assert [r["epoch"] for r in read_metrics(out)] == [1, 2, 3]


@pytest.mark.parametrize("keep_copy", [True, False])
def test_a_torn_last_line_of_a_finished_run_is_repaired_on_resume(keep_copy, finished, tiny_fashion, tmp_path):
    """The rows a resume needs are all there, then a line a crash cut short: it survived a resume
    of the finished run with exit 0 (issue 31); the file is rewritten, from last.pt's copy or,
    without one, from its own complete rows."""
    out = _copy(finished, tmp_path)
    if not keep_copy:
        state = torch.load(out / "checkpoints" / "last.pt", weights_only=True)
        torch.save({k: v for k, v in state.items() if k != "metrics"}, out / "checkpoints" / "last.pt")
    rows = read_metrics(out)
    with open(out / "metrics.jsonl", "ab") as f:
        f.write(b'{"epoch": 3, "lr')
    lines = []
    train(tiny_train_config(tiny_fashion, out, epochs=2, t_max=3), resume=True, log=lines.append)
    assert read_metrics(out) == rows and (out / "metrics.jsonl").read_text().endswith("}\n")
    assert any("line 3" in str(x) and "rewrote it from" in str(x) for x in lines)


def test_a_deleted_last_pt_beside_best_test_is_refused_naming_it_and_nothing_changes(finished, tiny_fashion,
                                                                                      tmp_path):
    out = _copy(finished, tmp_path)
    (out / "checkpoints" / "last.pt").unlink()
    before = _snapshot(out)
    for resume in (True, False):  # --resume and a plain run on that --out alike
        with pytest.raises(ValueError, match=r"checkpoints/best_test.pt.* record finished epochs, but "
                                             r"checkpoints/last.pt .* is missing; nothing was changed.*--restart"):
            train(tiny_train_config(tiny_fashion, out, epochs=3, t_max=3), resume=resume, log=quiet)
        assert _snapshot(out) == before
    lines = []
    train(tiny_train_config(tiny_fashion, out, epochs=1), restart=True, log=lines.append)  # the explicit flag
    assert any("--restart: deleted" in str(x) for x in lines)
    assert [r["epoch"] for r in read_metrics(out)] == [1]


def test_only_a_summary_or_metrics_left_is_refused_too(finished, tiny_fashion, tmp_path):
    out = _copy(finished, tmp_path)
    shutil.rmtree(out / "checkpoints")
    before = _snapshot(out)
    with pytest.raises(ValueError, match="summary.json, metrics.jsonl record finished epochs"):
        train(tiny_train_config(tiny_fashion, out, epochs=3, t_max=3), log=quiet)
    assert _snapshot(out) == before


def test_an_old_last_pt_without_metrics_and_damaged_metrics_is_refused(finished, tiny_fashion, tmp_path):
    out = _copy(finished, tmp_path)
    last = out / "checkpoints" / "last.pt"
    state = torch.load(last, weights_only=True)
    del state["metrics"]
    torch.save(state, last)
    (out / "metrics.jsonl").write_text("")
    before = _snapshot(out)
    with pytest.raises(ValueError, match=r"metrics.jsonl records epochs \[\] but .*last.pt is after epoch 2.*"
                                         "nothing was changed"):
        _resume(tiny_fashion, out)
    assert _snapshot(out) == before


def test_a_nan_last_pt_is_refused_not_called_the_last_good_checkpoint(finished, tiny_fashion, tmp_path):
    out = _copy(finished, tmp_path)
    last = out / "checkpoints" / "last.pt"
    state = torch.load(last, weights_only=True)
    next(v for v in state["model"].values() if v.is_floating_point()).fill_(float("nan"))
    torch.save(state, last)
    with pytest.raises(ValueError, match=r"last.pt: \d+ of \d+ weights are NaN or infinite"):
        _resume(tiny_fashion, out)


def test_a_damaged_config_json_is_taken_from_last_pt_on_resume(finished, tiny_fashion, tmp_path, capsys):
    from plif.cli.main import main

    out = _copy(finished, tmp_path)
    (out / "config.json").write_text("{garbage")
    assert main(["train", "--resume", str(out), "--epochs", "3"]) == 0
    assert "using the copy of the config in" in capsys.readouterr().out
    assert json.loads((out / "config.json").read_text())["epochs"] == 3
    assert [r["epoch"] for r in read_metrics(out)] == [1, 2, 3]


def test_restart_and_resume_together_are_refused(tiny_fashion, tmp_path):
    with pytest.raises(ValueError, match="--restart deletes the run in --out and --resume continues it"):
        train(tiny_train_config(tiny_fashion, tmp_path / "r"), resume=True, restart=True, log=quiet)


def test_a_symlinked_lock_is_refused_and_nothing_is_written_through_it(tiny_fashion, tmp_path):
    out, target = tmp_path / "run", tmp_path / "victim.txt"
    out.mkdir()
    target.write_text("precious")
    (out / ".lock").symlink_to(target)
    with pytest.raises(ValueError, match=r"\.lock: is a symbolic link"):
        train(tiny_train_config(tiny_fashion, out), log=quiet)
    assert target.read_text() == "precious"


@pytest.mark.parametrize("entry", ["config.json", "metrics.jsonl", "checkpoints", "checkpoints/last.pt"])
def test_a_symlinked_run_folder_entry_is_refused(entry, finished, tiny_fashion, tmp_path):
    out = _copy(finished, tmp_path)
    target = tmp_path / "elsewhere"
    os.replace(out / entry, target)
    (out / entry).symlink_to(target)
    before = hashlib.sha256(target.read_bytes()).hexdigest() if target.is_file() else None
    with pytest.raises(ValueError, match=f"{entry}: is a symbolic link"):
        _resume(tiny_fashion, out)
    if before:
        assert hashlib.sha256(target.read_bytes()).hexdigest() == before


def test_a_run_refused_while_taking_its_folder_leaves_nothing(tiny_fashion, tmp_path, monkeypatch):
    """A refusal before the first checkpoint left the folders it made and a (0-byte, on a full
    disk) .lock behind (issue 31)."""
    with pytest.raises(FileNotFoundError, match="holds no run"):
        train(tiny_train_config(tiny_fashion, tmp_path / "a" / "run"), resume=True, log=quiet)
    assert not (tmp_path / "a").exists()

    def full(*a):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full)  # writing the pid into the lock
    with pytest.raises(ValueError, match="No space left on device"):
        train(tiny_train_config(tiny_fashion, tmp_path / "b" / "run"), log=quiet)
    assert not (tmp_path / "b").exists()
    monkeypatch.undo()
    (tmp_path / "c").mkdir()  # a folder that was there stays, without a .lock of ours
    with pytest.raises(FileNotFoundError, match="holds no run"):
        train(tiny_train_config(tiny_fashion, tmp_path / "c"), resume=True, log=quiet)
    assert list((tmp_path / "c").iterdir()) == []


def test_an_interrupted_first_epoch_leaves_no_stub_folder(tiny_fashion, tmp_path, monkeypatch):
    monkeypatch.setattr(session_mod, "load_train_data", lambda *a: (_ for _ in ()).throw(OSError(5, "I/O error")))
    with pytest.raises(OSError):
        train(tiny_train_config(tiny_fashion, tmp_path / "a" / "b"), log=quiet)
    assert not (tmp_path / "a").exists()  # the folders it created are gone again
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "mine.txt").write_text("x")
    with pytest.raises(OSError):
        train(tiny_train_config(tiny_fashion, tmp_path / "c"), log=quiet)
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["mine.txt"]


def test_a_full_disk_names_the_file_that_could_not_be_written(tiny_fashion, tmp_path, monkeypatch, capsys):
    import plif.atomic as atomic
    from plif.cli.main import main
    from plif_testing import tiny_train_argv

    real_write = os.write

    def full(fd, data):
        if len(data) > 10_000:  # checkpoints: the first epoch's files are written until then
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(atomic.os, "write", full)
    rc = main(tiny_train_argv(tiny_fashion, tmp_path / "r", epochs=1))
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "Traceback" not in err
    assert err.endswith(f"{tmp_path / 'r' / 'checkpoints' / 'best_test.pt'}: No space left on device")
    assert not list((tmp_path / "r").rglob("*.tmp"))


def _fail_saving_last(monkeypatch):
    """Every write of ``last.pt`` fails as on a full disk; the other checkpoints are written."""
    real = epochs_mod.save_checkpoint

    def fail_last(path, state):
        if path.name == "last.pt":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, state)

    monkeypatch.setattr(epochs_mod, "save_checkpoint", fail_last)


def test_summary_never_names_a_checkpoint_that_was_not_written(finished, tiny_fashion, tmp_path, monkeypatch):
    out = _copy(finished, tmp_path)
    _fail_saving_last(monkeypatch)
    with pytest.raises(OSError):
        _resume(tiny_fashion, out)
    summary = json.loads((out / "summary.json").read_text())
    # the failed epoch 3 is not claimed (metrics.jsonl may hold it: a resume keeps what last.pt has)
    assert summary["epochs_run"] == 2 == torch.load(out / "checkpoints" / "last.pt", weights_only=True)["epoch"]
    for key in ("accuracy_A", "accuracy_B"):
        if key in summary and summary[key]["checkpoint"]:
            assert (out / summary[key]["checkpoint"]).is_file()


def test_plain_run_on_a_finished_folder_points_at_resume_and_restart(finished, tiny_fashion, tmp_path):
    out = _copy(finished, tmp_path)
    with pytest.raises(ValueError, match="already holds a run; pass --resume to continue it, --restart"):
        train(tiny_train_config(tiny_fashion, out), log=quiet)
    assert RunFolder(out).has_finished_epoch()


def test_a_full_disk_in_the_first_epoch_leaves_no_dead_end(tiny_fashion, tmp_path, monkeypatch):
    _fail_saving_last(monkeypatch)
    with pytest.raises(OSError, match="last.pt"):
        train(tiny_train_config(tiny_fashion, tmp_path / "r", epochs=1), log=quiet)
    assert not (tmp_path / "r").exists()  # best_test.pt and the metrics row of the unfinished epoch too
    monkeypatch.undo()
    train(tiny_train_config(tiny_fashion, tmp_path / "r", epochs=1), log=quiet)  # no --restart needed


def test_tensorboard_os_errors_name_its_folder(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    from plif.train.tb_log import TensorBoardLog

    log = TensorBoardLog(tmp_path / "tb", build_network(TINY_NET, (1, 28, 28), 2))
    monkeypatch.setattr(log.writer, "flush", lambda: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left")))
    with pytest.raises(OSError) as e:
        log.epoch({"epoch": 1, "train_loss": 0.5})
    assert e.value.filename == str(tmp_path / "tb")
    monkeypatch.undo()
    log.close()


@pytest.mark.parametrize("key,value", [("optimizer", None), ("epoch", "two"), ("epoch", 0)])
def test_a_last_pt_missing_what_a_resume_needs_is_refused_naming_it(key, value, finished, tiny_fashion, tmp_path):
    out = _copy(finished, tmp_path)
    last = out / "checkpoints" / "last.pt"
    state = torch.load(last, weights_only=True)
    state.pop(key) if value is None else state.__setitem__(key, value)
    torch.save(state, last)
    before = _snapshot(out)
    with pytest.raises(ValueError, match=r"last.pt: not a plif resume checkpoint .*nothing was changed"):
        _resume(tiny_fashion, out)
    assert _snapshot(out) == before
