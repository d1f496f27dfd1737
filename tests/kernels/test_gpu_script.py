"""``benchmarks/gpu/run.sh``: the CPU dry run writes every stage's JSON and the summary; a failing
stage keeps its error and the others' numbers."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu" / "run.sh"
STAGES = ("grid", "sync", "neuron", "train", "protocol")


def _env():
    src = str(REPO / "src")
    return {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "2",
            "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}


@pytest.mark.slow
def test_dry_run_writes_every_stage(tiny_fashion, tmp_path):
    out = tmp_path / "gpu"
    proc = subprocess.run(["bash", str(SCRIPT), str(tiny_fashion), str(out), "--dry-run"], env=_env(),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dry_run"] is True and set(summary["stages"]) == set(STAGES)
    recs = {s: json.loads((out / f"{s}.json").read_text()) for s in STAGES}
    assert all(r["ok"] and r["error"] is None for r in recs.values()), {s: r["error"] for s, r in recs.items()}
    grid = recs["grid"]["result"]
    assert grid["cases"] > 20 and not grid["failed"] and grid["compile"]["ok"]
    assert recs["sync"]["result"]["graph_vs_eager"]["max_abs_param_err"] < 1e-5
    assert {r["backend"] for r in recs["neuron"]["result"]["rows"]} == {"cpu", "bptt"}
    assert {r["variant"] for r in recs["train"]["result"]["rows"]} == {"naive", "auto"}
    epochs = recs["protocol"]["result"]["epochs"]
    assert [e["epoch"] for e in epochs] == [1, 2] and all(0 <= e["test_acc"] <= 1 for e in epochs)
    table = (out / "summary.txt").read_text()
    assert "CPU DRY RUN" in table and "train step:" in table and "protocol" in table


def test_failing_stage_keeps_the_others(tmp_path):
    spec = importlib.util.spec_from_file_location("gpu_run", REPO / "benchmarks" / "gpu" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "gpu"
    rc = mod.main(["--data-dir", str(tmp_path / "no-such-folder"), "--out", str(out), "--dry-run",
                   "--stages", "sync,protocol"])
    assert rc == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stages"]["sync"]["ok"] and not summary["stages"]["protocol"]["ok"]
    protocol = json.loads((out / "protocol.json").read_text())
    assert "no-such-folder" in json.dumps(protocol["result"]["failed_attempts"])
    assert "protocol       NO" in (out / "summary.txt").read_text()


def test_usage_errors():
    proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=_env())
    assert proc.returncode == 2 and "usage:" in proc.stderr
    proc = subprocess.run(["bash", str(SCRIPT), "/no/such/dir", "/tmp/x"], capture_output=True, text=True, env=_env())
    assert proc.returncode == 2 and "Fashion-MNIST folder not found: /no/such/dir" in proc.stderr
