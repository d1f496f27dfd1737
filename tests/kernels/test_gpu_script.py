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

from plif.catalog import get_dataset

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu" / "run.sh"
# both plans (spikingjelly needs a wheels folder): the first call's stages, then the second's
STAGES = ("grid", "compile", "sync", "neuron", "train", "fuse", "residual", "protocol", "block", "cifar10", "dvs128-gesture", "bound",
          "cifar10-dvs", "memory")
NETS = {"cifar10": "one random image batch [B, 3, 32, 32]", "dvs128-gesture": "synthetic event frames [T, B, 2, 128, 128]",
        "cifar10-dvs": "synthetic event frames [T, B, 2, 128, 128]"}


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
                           str(tmp_path / "work"), "--stages", "first,second"],
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
    assert grid["cases"] > 5 and not grid["failed"]
    assert [r["batch"] for r in recs["compile"]["result"]["rows"]] == [16, 64, 20]  # no CPU-only recompile
    for check in ("graph_vs_eager", "compile_graph_vs_compile"):  # the compiled network inside the trainer's step
        sync = recs["sync"]["result"][check]
        assert sync["agree"] and sync["max_abs_param_err"] < 1e-5 and sync["eval"][2] == 11, sync
    # plif.bench.block's interpreter run (its only test: the stage calls run_block_bench as plif bench block does)
    block = recs["block"]["result"]
    assert block["dry"] and block["check_ok"] and len(block["check"]) == 2, block["check"]
    assert [c["case"] for c in block["cases"]] == ["gesture-T3-B2-C4-8x8-float32", "cifar10-T2-B2-C4-6x6-float32"]
    gesture, cifar = ({r["name"]: r for r in c["rows"]} for c in block["cases"])
    fused = ["fused stats", "fused forward", "fused backward", "fused bn_input_grad", "fused fwd", "fused fwd+bwd"]
    assert list(gesture) == fused + ["fused backward, chunks <= 2", "composed fwd", "composed fwd+bwd"]
    assert list(cifar) == fused + ["composed fwd", "composed fwd+bwd"]  # T = 2: one chunk either way
    for row in gesture.values():
        assert row["ms"] > 0 and row["ideal_bytes"] > 0 and row["pct_copy_bound"] > 0, row
        assert row["device_ms"] is None  # no CUDA: no profiler device time
    fuse = recs["fuse"]["result"]  # plif.fuse's hand-written networks (issue 46), eager on the CPU
    assert {r["network"] for r in fuse["rows"]} == {"paper, build_network", "paper, by hand + plif.fuse",
                                                   "residual, as written", "residual, plif.fuse"}
    assert all(r["ms_per_step"] > 0 for r in fuse["rows"]) and set(fuse["ratios"]["eager"]) == {
        "paper by hand / build_network", "residual as written / fused"}
    neuron = recs["neuron"]["result"]["rows"]
    assert {(r["backend"], r["pass_"]) for r in neuron} == {(b, p) for b in ("cpu", "bptt") for p in ("fwd", "fwd+bwd")}
    assert all(r["time_ms"] > 0 and r["pct_copy_bound"] > 0 and r["extra"]["device_time"] == "needs CUDA" for r in neuron)
    for stage, dataset in (("train", "fashion-mnist"), *((n, n) for n in NETS)):
        res = recs[stage]["result"]
        assert res["dataset"] == dataset and "auto" in {r["variant"] for r in res["rows"]}
        measured = [r for r in res["rows"] if not r["note"].startswith("unavailable")]
        assert all(r["ms_per_step"] > 0 and r["kernels"] is None and r["gflop"] > 0 for r in measured)
        assert all(r["bound_ms"] is None for r in measured)  # no GPU, no peaks
    for net, text in NETS.items():  # the product's --memory and --memory none beside it, SpikingJelly's AMP
        res = recs[net]["result"]
        assert res["input"].startswith(text) and res["memory_default"] == "fused"
        assert [(r["variant"], r["memory"]) for r in res["rows"]][:2] == [("auto", "fused"), ("auto", "none")]
        assert [r["variant"] for r in res["rows"]][2:] == ["spikingjelly", "spikingjelly+bf16"]
        assert res["network"] == get_dataset(net).network_string(cpu=True)
    residual = recs["residual"]["result"]  # issue 47: plif's residual zoo beside SpikingJelly, eager and bf16
    assert [(r["network"], r["variant"]) for r in residual["rows"] if r["variant"].startswith("plif")] == [
        (n, v) for n in ("sew-resnet18", "sew-7b-net") for v in ("plif", "plif+bf16")]
    assert all(r["ms_per_step"] > 0 for r in residual["rows"])
    bound = recs["bound"]["result"]["networks"]["fashion-mnist"]["rows"]  # issue 55: step against its products
    assert [r["precision"] for r in bound] == ["fp32"] and bound[0]["products"] == 5
    assert bound[0]["bound_ms"] > 0 and bound[0]["step_ms"] > 0 and bound[0]["spikingjelly_ms"] > 0
    memory = recs["memory"]["result"]
    assert [r["config"] for r in memory["rows"]] == ["low"] and memory["vs_naive"] == {}  # one fresh process: the mechanism
    assert memory["network"] == "nmnist" and all(r["network"] == "nmnist" for r in memory["rows"])
    assert all(r["peak_mb"] > 100 and r["error"] is None for r in memory["rows"])
    # plif train's defaults, resolved for the CPU, as config.json recorded them
    from plif.layers.precision import native_bf16  # the default --amp auto: bf16 on a CPU with it natively

    assert recs["protocol"]["result"]["ran"] == {"cuda_graph": False, "compile": False, "tf32": True,
                                                 "amp": "bf16" if native_bf16() else None, "memory": "fused"}
    epochs = recs["protocol"]["result"]["epochs"]
    run_rows = [json.loads(line) for line in files["protocol-run/metrics.jsonl"].decode().splitlines()]
    assert epochs == [{k: m[k] for k in epochs[0]} for m in run_rows]  # what the run wrote, epoch by epoch
    assert [e["epoch"] for e in epochs] == [1, 2] and epochs[1]["lr"] < epochs[0]["lr"]  # cosine, t_max 2
    assert all((e["test_acc"] * 32).is_integer() for e in epochs)  # accuracy over the 32 test samples
    table = (out / "summary.txt").read_text()
    assert table == files["summary.txt"].decode() and "CPU DRY RUN" in table
    for heading in ("neuron (fwd+bwd)", "train step, fashion-mnist", "train step, dvs128-gesture T=1",
                    "train step, cifar10 T=1", "train step, cifar10-dvs T=1", "memory, nmnist T=1 B=1"):
        assert heading in table
    assert (out / "log.txt").read_text().count("=== ") == len(STAGES)


def test_failing_stage_keeps_the_others(tmp_path):
    out = tmp_path / "gpu"
    rc = _script().main(["--data-dir", str(tmp_path / "no-such-folder"), "--out", str(out), "--work",
                         str(tmp_path / "w"), "--dry-run", "--stages", "neuron,protocol"])
    assert rc == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stages"]["neuron"]["ok"] and not summary["stages"]["protocol"]["ok"]
    files = _unpacked(out)
    assert json.loads(files["neuron.json"])["result"]["rows"]
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


def test_plans_expand_in_order_each_stage_once():
    mod = _script()
    first, second = (list(mod.PLANS[p]) for p in ("first", "second"))
    assert mod.expand_stages("first") == first and first[-1] == "protocol" and "cifar10" in second
    assert mod.expand_stages("first, second") == first + [s for s in second if s != "spikingjelly"]
    assert mod.expand_stages("sync,first") == ["sync"] + [s for s in first if s != "sync"]
    with pytest.raises(ValueError, match="--stages: unknown nope; valid: first, second, spikingjelly"):
        mod.expand_stages("first,nope")


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


def test_the_block_stage_is_ok_only_when_its_device_check_is(tmp_path, monkeypatch):
    """``stage_block``'s result carries ``ok`` (the check's), so a failed check on the device fails the
    stage; the summary counts the check's cases and the shapes measured (it used to print "0 rows")."""
    import plif.bench.block

    mod = _script()
    ctx = mod.Context(mod._parser().parse_args(["--data-dir", "x", "--out", str(tmp_path / "o"),
                                                "--work", str(tmp_path / "w"), "--dry-run"]))
    ctx.work.mkdir()
    cases = [{"case": "gesture", "copy_ms": 1.0, "copy_gbs": 2.0, "rows": []},
             {"case": "cifar10", "note": "not run: time budget spent"}]
    for check_ok in (False, True):
        result = {"dry": True, "check_ok": check_ok, "check": [{"ok": True}, {"ok": check_ok}], "cases": cases}
        monkeypatch.setattr(plif.bench.block, "run_block_bench", lambda *a, result=result, **k: dict(result))
        rec = mod.run_stage(ctx, "block", mod.STAGES["block"][0], budget=60)
        assert rec["ok"] is check_ok and rec["error"] is None and rec["result"]["check_ok"] is check_ok
        (line,) = [ln for ln in mod.summary_lines("header", {"block": rec}) if ln.startswith("block")]
        assert line.split()[1] == ("yes" if check_ok else "NO")
        assert line.endswith(f"check {1 + check_ok}/2 cases ok, 1/2 shapes measured"), line
