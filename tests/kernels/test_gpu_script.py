"""``benchmarks/gpu/run.sh``: the CPU dry run runs every stage of the default plan and packs what they
wrote; a failing or slow stage keeps its error (or partial result) and the others' numbers."""
import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu" / "run.sh"
STAGES = ("grid", "sync", "neuron", "train", "memory", "dvs", "protocol")


def _env():
    src = str(REPO / "src")
    return {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "2",
            "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _script():
    spec = importlib.util.spec_from_file_location("gpu_run", REPO / "benchmarks" / "gpu" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _unpacked(out: Path) -> dict:
    with tarfile.open(out / "results.tar.gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


@pytest.mark.slow
def test_dry_run_runs_every_stage_and_packs_them(tiny_fashion, tmp_path):
    out = tmp_path / "gpu"
    proc = subprocess.run(["bash", str(SCRIPT), str(tiny_fashion), str(out), "--dry-run", "--work",
                           str(tmp_path / "work")],
                          env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # the device returns at most 8 files: everything but the summary and the log is in one tarball
    assert sorted(p.name for p in out.iterdir()) == ["log.txt", "results.tar.gz", "summary.json", "summary.txt"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dry_run"] is True and list(summary["stages"]) == list(STAGES)
    files = _unpacked(out)
    assert "protocol-run/metrics.jsonl" in files and not any("checkpoints" in f for f in files)
    recs = {s: json.loads(files[f"{s}.json"]) for s in STAGES}
    assert all(r["ok"] and r["error"] is None and not r["timed_out"] for r in recs.values()), \
        {s: r["error"] for s, r in recs.items()}
    assert all(r["seconds"] < r["budget_s"] for r in recs.values())
    grid = recs["grid"]["result"]
    assert grid["cases"] > 5 and not grid["failed"] and grid["compile"]["ok"]
    assert recs["sync"]["result"]["graph_vs_eager"]["max_abs_param_err"] < 1e-5
    neuron = recs["neuron"]["result"]["rows"]
    assert {(r["backend"], r["pass_"]) for r in neuron} == {(b, p) for b in ("cpu", "bptt") for p in ("fwd", "fwd+bwd")}
    assert all(r["time_ms"] > 0 and r["pct_copy_bound"] > 0 and r["extra"]["device_time"] == "needs CUDA" for r in neuron)
    for stage, dataset in (("train", "fashion-mnist"), ("dvs", "dvs128-gesture")):
        res = recs[stage]["result"]
        assert res["dataset"] == dataset and {"naive", "auto"} <= {r["variant"] for r in res["rows"]}
        assert all(r["ms_per_step"] > 0 and r["kernels"] is None for r in res["rows"] if not r["note"].startswith("unavailable"))
    assert recs["dvs"]["result"]["input"].startswith("synthetic event frames")
    memory = recs["memory"]["result"]
    assert [r["config"] for r in memory["rows"]] == ["naive", "low"] and memory["vs_naive"]["naive"] == 1.0
    assert memory["network"] == "nmnist" and all(r["network"] == "nmnist" for r in memory["rows"])
    assert all(r["peak_mb"] > 100 and r["error"] is None for r in memory["rows"])
    epochs = recs["protocol"]["result"]["epochs"]
    run_rows = [json.loads(line) for line in files["protocol-run/metrics.jsonl"].decode().splitlines()]
    assert epochs == [{k: m[k] for k in epochs[0]} for m in run_rows]  # what the run wrote, epoch by epoch
    assert [e["epoch"] for e in epochs] == [1, 2] and epochs[1]["lr"] < epochs[0]["lr"]  # cosine, t_max 2
    assert all((e["test_acc"] * 32).is_integer() for e in epochs)  # accuracy over the 32 test samples
    table = (out / "summary.txt").read_text()
    assert table == files["summary.txt"].decode() and "CPU DRY RUN" in table
    for heading in ("neuron (fwd+bwd)", "train step, fashion-mnist", "train step, dvs128-gesture T=1",
                    "memory, nmnist T=1 B=1"):
        assert heading in table
    assert (out / "log.txt").read_text().count("=== ") == len(STAGES)


def test_failing_stage_keeps_the_others(tmp_path):
    out = tmp_path / "gpu"
    rc = _script().main(["--data-dir", str(tmp_path / "no-such-folder"), "--out", str(out), "--work",
                         str(tmp_path / "w"), "--dry-run", "--stages", "sync,protocol"])
    assert rc == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stages"]["sync"]["ok"] and not summary["stages"]["protocol"]["ok"]
    files = _unpacked(out)
    assert json.loads(files["sync.json"])["result"]["graph_vs_eager"]["max_abs_param_err"] < 1e-5
    protocol = json.loads(files["protocol.json"])
    assert "no-such-folder" in json.dumps(protocol["result"]["failed_attempts"])
    assert "protocol       NO" in (out / "summary.txt").read_text()


def test_a_stage_past_its_budget_is_stopped_and_keeps_what_it_measured(tmp_path):
    mod = _script()
    ctx = mod.Context(mod._parser().parse_args(["--data-dir", "x", "--out", str(tmp_path / "o"),
                                                "--work", str(tmp_path / "w"), "--dry-run"]))
    ctx.work.mkdir()

    def slow(ctx, st):
        st.partial["rows"] = ["first"]
        assert st.deadline < time.monotonic() + 0.5
        time.sleep(30)

    t = time.perf_counter()
    rec = mod.run_stage(ctx, "slow", slow, budget=0.5)
    assert time.perf_counter() - t < 5
    assert rec["timed_out"] and rec["error"] == "stopped by its time budget of 0s" and rec["result"] == {"rows": ["first"]}
    assert json.loads((ctx.work / "slow.json").read_text())["timed_out"] is True


def test_budgets_and_a_run_with_no_time_left(tmp_path):
    mod = _script()
    assert mod._budgets("train=200,memory=60.5")["train"] == 200.0
    for bad, message in (("nope=3", "unknown stage 'nope'"), ("memory=x", "'memory=x' is not name=seconds")):
        with pytest.raises(ValueError, match=message):
            mod._budgets(bad)
    out = tmp_path / "gpu"
    assert mod.main(["--data-dir", "x", "--out", str(out), "--work", str(tmp_path / "w"), "--dry-run",
                     "--stages", "sync", "--budget", "5"]) == 1
    assert json.loads((out / "summary.json").read_text())["stages"]["sync"]["error"].startswith("not run: ")


def test_usage_errors():
    proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=_env())
    assert proc.returncode == 2 and "usage:" in proc.stderr
    proc = subprocess.run(["bash", str(SCRIPT), "/no/such/dir", "/tmp/x"], capture_output=True, text=True, env=_env())
    assert proc.returncode == 2 and "Fashion-MNIST folder not found: /no/such/dir" in proc.stderr


def test_a_wheels_folder_without_spikingjelly_is_named(tmp_path):
    (tmp_path / "wheels").mkdir()
    out = tmp_path / "gpu"
    assert _script().main(["--data-dir", "x", "--out", str(out), "--work", str(tmp_path / "w"), "--dry-run",
                           "--stages", "spikingjelly", "--spikingjelly-wheels", str(tmp_path / "wheels")]) == 1
    error = json.loads((out / "summary.json").read_text())["stages"]["spikingjelly"]["error"]
    assert error == f"FileNotFoundError: no spikingjelly wheel in {tmp_path / 'wheels'}"
