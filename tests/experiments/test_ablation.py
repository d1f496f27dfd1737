import json
import re


from plif.cli.main import main
from plif.experiments.ablation import ABLATIONS, sweep_status

from plif_testing import TINY_NET, edit_stored_config, tiny_train_argv


def _argv(root, out, *extra):
    return tiny_train_argv(root, out, *extra, command="ablate", epochs=1, batch_size=40, lr=5e-3,
                           max_train_samples=120, max_test_samples=40)


def test_sweep_runs_every_ablation_then_skips_then_resumes(tiny_fashion, tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(_argv(tiny_fashion, out)) == 0
    sweep = json.loads((out / "sweep.json").read_text())
    assert [e["label"] for e in sweep["runs"]] == list(ABLATIONS)
    assert sweep["command"].startswith("plif ablate --dataset fashion-mnist")
    for e in sweep["runs"]:
        assert e["status"] == "finished" and e["epochs_run"] == 1
        config = json.loads((out / e["path"] / "config.json").read_text())
        a = ABLATIONS[e["label"]]
        # the folder name is a label; config.json is what ran
        assert (config["neuron"], config["tau0"], config["pool"]) == (a.neuron, a.tau0, a.pool)
        assert config["network_kwargs"]["neuron"] == a.neuron.upper()
        assert config["network"] == TINY_NET
        metrics = (out / e["path"] / "metrics.jsonl").read_text().splitlines()
        assert len(metrics) == 1
        taus = json.loads(metrics[0])["taus"]
        assert len(taus) == (2 if a.neuron == "plif" else 0)
    log = capsys.readouterr().out
    # issue 32: a LIF run logged "tau []" and the network string with PLIF in it
    assert "tau []" not in log and len(re.findall(r"\btau \d", log)) == 3  # the epoch line of each PLIF entry
    assert log.count("network c4k3s1-BN-LIF-MPk4s4-DP-FC100-LIF-APk10s10,") == 2
    assert log.count("network c4k3s1-BN-PLIF-APk4s4-DP-FC100-PLIF-APk10s10,") == 1

    before = {e["label"]: (out / e["path"] / "metrics.jsonl").stat().st_mtime_ns for e in sweep["runs"]}
    assert main(_argv(tiny_fashion, out)) == 0
    log = capsys.readouterr().out
    assert log.count("finished already") == len(ABLATIONS)
    assert all((out / label / "metrics.jsonl").stat().st_mtime_ns == t for label, t in before.items())

    first = json.loads((out / "lif-tau2" / "metrics.jsonl").read_text().splitlines()[0])
    assert main(_argv(tiny_fashion, out, "--epochs", "2", "--only", "lif-tau2")) == 0
    assert "resuming" in capsys.readouterr().out
    rows = [json.loads(l) for l in (out / "lif-tau2" / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2]
    assert rows[0]["test_acc"] == first["test_acc"] and rows[0]["train_loss"] == first["train_loss"]
    assert sweep_status(out / "lif-tau2", 2) == "finished"
    assert sweep_status(out / "plif-tau2", 2) == "partial"
    entries = {e["label"]: e for e in json.loads((out / "sweep.json").read_text())["runs"]}
    assert set(entries) == set(ABLATIONS) and entries["lif-tau2"]["epochs_run"] == 2


def test_sweep_refuses_what_it_cannot_do(tiny_fashion, tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(_argv(tiny_fashion, out, "--only", "plif-tau2,nope")) == 2
    assert "unknown ablation nope; valid: plif-tau2" in capsys.readouterr().err
    (out / "lif-tau2").mkdir(parents=True)
    (out / "lif-tau2" / "config.json").write_text("{}")
    # a run that stopped while starting is no dead end: it starts again (issue #13)
    capsys.readouterr()
    assert main(_argv(tiny_fashion, out, "--only", "lif-tau2", "--surrogate", "sigmoid")) == 0
    assert sweep_status(out / "lif-tau2", 1) == "finished"
    log = capsys.readouterr().out  # the base's surrogate is kept, and said where it is not the paper's (issue 40)
    assert "[lif-tau2] starting: neuron lif, tau0 2, max pooling, sigmoid surrogate, 1 epochs" in log
    assert "every neuron LIF (tau = 2) with the sigmoid surrogate" in log
    (out / "sweep.json").write_text(json.dumps({"dataset": "cifar10", "runs": []}))
    assert main(_argv(tiny_fashion, out, "--only", "plif-tau2")) == 2
    assert "holds a sweep on 'cifar10'" in capsys.readouterr().err


def test_sweep_status_of_folders(tmp_path):
    assert sweep_status(tmp_path / "none", 3) == "new"
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.json").write_text("{}")
    (run / "checkpoints" / "last.pt").write_bytes(b"x")
    # last.pt without metrics: resumed (metrics rebuilt from last.pt, or refused), never wiped (issue #22)
    assert sweep_status(run, 2) == "partial"
    (run / "metrics.jsonl").write_text(json.dumps({"epoch": 1}) + "\n")
    (run / "summary.json").write_text(json.dumps({"finished": True, "epochs_run": 2}))
    assert sweep_status(run, 2) == "finished"
    assert sweep_status(run, 3) == "partial"
    (run / "summary.json").write_text("{truncated")
    assert sweep_status(run, 2) == "partial"


def test_an_entry_whose_summary_is_not_an_object_is_listed_without_accuracy(tmp_path):
    from plif.experiments.ablation import _entry

    run = tmp_path / "plif-tau2"
    run.mkdir()
    (run / "summary.json").write_text("[1, 2]")
    entry = _entry(ABLATIONS["plif-tau2"], "new", run)
    assert entry["status"] == "new" and "accuracy_A" not in entry
    assert sweep_status(run, 2) == "new"


def test_ablate_and_report_read_one_sweep_format(tiny_fashion, tmp_path, capsys):
    """A sweep.json whose entries are not entries is refused in one line by both readers (plif ablate
    used to die with a TypeError traceback on it)."""
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"dataset": "fashion-mnist", "runs": [1]}))
    for argv in (_argv(tiny_fashion, out, "--only", "plif-tau2"), ["report", str(out), "--out", str(tmp_path / "r")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"{out / 'sweep.json'}: not a plif sweep file" in err and "Traceback" not in err


def test_per_channel_tau_goes_to_the_plif_entries_only(tiny_fashion, tmp_path, monkeypatch):
    """LIF's tau is fixed, so --per-channel-tau, meaningless for it (issue 39.4), is PLIF's alone."""
    import plif.train.run as run_mod

    ran = {}
    monkeypatch.setattr(run_mod, "train_status", lambda cfg, resume, log: (ran.setdefault(cfg.neuron + str(cfg.tau0), cfg),
                                                                           False))
    assert main(_argv(tiny_fashion, tmp_path / "sweep", "--per-channel-tau")) == 0
    assert {name: cfg.per_channel_tau for name, cfg in ran.items()} == {
        "plif2.0": True, "lif2.0": False, "plif16.0": True, "lif16.0": False}


def test_a_sweep_whose_lif_entries_recorded_per_channel_tau_continues(tiny_fashion, tmp_path, capsys):
    """Before --per-channel-tau went to the PLIF entries alone, a sweep's LIF runs recorded it; continuing
    such a sweep was refused ("per_channel_tau: run has True, now False") though LIF has no tau to learn."""
    out = tmp_path / "sweep"
    assert main(_argv(tiny_fashion, out, "--only", "lif-tau2")) == 0
    edit_stored_config(out / "lif-tau2", lambda config: config.update(per_channel_tau=True))
    assert main(_argv(tiny_fashion, out, "--epochs", "2", "--only", "lif-tau2", "--per-channel-tau")) == 0, \
        capsys.readouterr().err
    assert sweep_status(out / "lif-tau2", 2) == "finished"
