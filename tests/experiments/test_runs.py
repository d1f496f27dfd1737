import json

import pytest

from plif.experiments.runs import effective_pool, expand_run_paths, read_run

from .conftest import rows, write_run


def test_accuracies_come_from_the_metrics(tmp_path):
    run = read_run(write_run(tmp_path / "r", rows=rows([0.5, 0.8, 0.8, 0.7], val_accs=[0.4, 0.9, 0.9, 0.95])))
    assert run.accuracy_a() == (0.8, 2)  # ties go to the earliest epoch, as train's summary does
    assert run.accuracy_b() == (0.7, 4)
    assert run.notes == []


def test_unfinished_and_older_runs_are_read_with_notes(tmp_path):
    path = write_run(tmp_path / "old", epochs=10, rows=rows([0.5, 0.6]), summary=False)
    lines = path.joinpath("metrics.jsonl").read_text().splitlines()
    old = [{k: v for k, v in json.loads(l).items() if k not in ("taus", "epoch_time_s")} for l in lines]
    path.joinpath("metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old) + '{"epoch": 3, "te')
    run = read_run(path)
    assert [m["epoch"] for m in run.metrics] == [1, 2]
    text = " | ".join(run.notes)
    assert "metrics.jsonl line 3" in text and "not valid JSON" in text
    assert "no summary.json" in text and "unfinished: 2 of 10 epochs" in text
    assert "no taus" in text and "lower bounds" in text
    assert run.accuracy_b() is None and run.taus() == []


def test_a_folder_without_config_is_not_a_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="no config.json"):
        read_run(tmp_path)


def test_effective_pool_reads_the_network():
    assert effective_pool({"network": "c4k3s1-BN-PLIF-MPk2s2-FC100-PLIF-APk10s10"}) == "max"
    assert effective_pool({"network": "c4k3s1-BN-PLIF-APk2s2-FC100-PLIF-APk10s10"}) == "avg"
    assert effective_pool({"network": "c4k3s1-BN-PLIF-MPk2s2-FC100-PLIF-APk10s10", "pool": "avg"}) == "avg"


def test_sweep_folders_expand_to_their_runs(tmp_path):
    write_run(tmp_path / "s" / "a", rows=rows([0.5]))
    (tmp_path / "s" / "sweep.json").write_text(json.dumps({"runs": [{"label": "first", "path": "a"}]}))
    write_run(tmp_path / "b", rows=rows([0.5]))
    assert expand_run_paths([tmp_path / "s", tmp_path / "b"]) == [(tmp_path / "s" / "a", "first"), (tmp_path / "b", "b")]
    with pytest.raises(FileNotFoundError, match="no such run"):
        expand_run_paths([tmp_path / "missing"])
    (tmp_path / "s" / "sweep.json").write_text("[1]")
    with pytest.raises(ValueError, match="not a plif sweep file"):
        expand_run_paths([tmp_path / "s"])
