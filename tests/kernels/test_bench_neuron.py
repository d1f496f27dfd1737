"""``plif bench neuron``: rows for every backend and pass, ratios, memory skips, JSON, CLI."""
import json

import pytest

from plif.bench import neuron as bn
from plif.cli.main import main


@pytest.fixture
def tiny_case(monkeypatch):
    monkeypatch.setitem(bn.CASES, "tiny", (3, 2, 4, 5, 5))
    return "tiny"


def test_rows_ratios_and_table(tiny_case):
    rows = bn.run_neuron_bench([tiny_case], ["bptt", "reference"], "cpu", reps=2, budget_s=1, log=lambda *_: None)
    assert [(r.backend, r.pass_) for r in rows] == [("bptt", "fwd"), ("bptt", "fwd+bwd"),
                                                    ("reference", "fwd"), ("reference", "fwd+bwd")]
    for r in rows:
        assert r.time_ms > 0 and r.gb_per_s > 0 and r.pct_copy_bound > 0 and r.reps >= 1
        assert r.extra["ideal_bytes"] == 3 * 2 * 4 * 5 * 5 * 12 * (1 if r.pass_ == "fwd" else 2)
    naive = {r.pass_: r.time_ms for r in rows if r.backend == "reference"}
    for r in rows:  # each row against the naive loop's time for the same pass
        assert r.vs_naive == pytest.approx(naive[r.pass_] / r.time_ms)
    table = bn.format_table(rows)
    assert table.count("\n") == 1 + len(rows) and "| tiny | bptt | fwd+bwd |" in table


def test_backend_that_would_not_fit_is_skipped(tiny_case, monkeypatch):
    monkeypatch.setattr(bn, "free_memory", lambda device: 100)
    rows = bn.run_neuron_bench([tiny_case], ["reference"], "cpu", reps=1, budget_s=1, log=lambda *_: None)
    assert all(r.time_ms is None and r.note.startswith("skipped") for r in rows)
    assert "skipped" in bn.format_table(rows)


def test_unknown_case_or_backend_is_an_error():
    with pytest.raises(ValueError, match="unknown case 'nope'"):
        bn.run_neuron_bench(["nope"], ["bptt"], "cpu")
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        bn.run_neuron_bench(["FC-T8-B64-N2048"], ["nope"], "cpu")


def test_default_backends_lead_with_the_fused_one():
    import torch

    backends = bn.default_backends(torch.device("cpu"))
    assert backends[-3:] == ["bptt", "reference", "spikingjelly"]


def test_cli_writes_json(tiny_case, tmp_path, capsys):
    out = tmp_path / "bench.json"
    rc = main(["bench", "neuron", "--cases", tiny_case, "--backends", "bptt,reference", "--reps", "1",
               "--budget", "1", "--train-only", "--json", str(out), "--quiet"])
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["meta"]["device"] == "cpu" and len(data["rows"]) == 2
    assert {r["pass"] for r in data["rows"]} == {"fwd+bwd"}
    printed = capsys.readouterr().out
    assert "| tiny | reference | fwd+bwd |" in printed
    assert "neuron backends: reference ok; bptt ok;" in printed and "cpu ok" in printed
    assert not list(tmp_path.glob("*.tmp"))


def test_bench_without_what_prints_help_and_train_is_wired(capsys):
    assert main(["bench"]) == 2
    out = capsys.readouterr().out
    assert "neuron" in out and "train" in out
    with pytest.raises(SystemExit):
        main(["bench", "train", "--help"])
    assert "--batches" in capsys.readouterr().out


def test_a_bound_exceeded_is_flagged_as_noise(tiny_case, monkeypatch):
    """Under load the copy can be timed slower than the pass (a run printed "1268 % of copy bound")."""
    calls = []

    def timer(device, fn, reps, budget_s):
        calls.append(fn)
        return (1.0 if len(calls) == 1 else 1e-4), 1  # the first timing of a case is the copy

    monkeypatch.setattr(bn, "_timer", timer)
    rows = bn.run_neuron_bench([tiny_case], ["bptt"], "cpu", reps=1, budget_s=1, log=lambda *_: None)
    assert all(r.pct_copy_bound > 100 and r.note == bn.NOISE for r in rows)
    table = bn.format_table(rows)
    assert "(noise)" in table and bn.NOISE in table
    assert bn.bound_note(99.0, None) == "" and bn.bound_note(None, 101.0) == bn.NOISE


def test_cpu_rows_say_the_device_time_needs_cuda(tiny_case):
    rows = bn.run_neuron_bench([tiny_case], ["bptt"], "cpu", reps=1, budget_s=1, log=lambda *_: None)
    assert all(r.device_ms is None and r.kernels is None and r.extra["device_time"] == "needs CUDA" for r in rows)
    assert "device ms" not in bn.format_table(rows)  # the device columns only where there is a device


def test_past_the_deadline_nothing_more_runs(tiny_case):
    rows = bn.run_neuron_bench([tiny_case], ["bptt", "reference"], "cpu", reps=1, budget_s=1,
                               log=lambda *_: None, deadline=0.0)
    assert len(rows) == 4 and all(r.time_ms is None and r.note == "not run: time budget spent" for r in rows)


def test_device_columns_and_the_spikingjelly_path_in_the_table():
    rows = [bn.BenchRow("c", "triton", "fwd+bwd", 0.9, 345.0, 14.8, device_ms=0.3, pct_device_bound=44.0, kernels=4),
            bn.BenchRow("c", "spikingjelly", "fwd+bwd", 0.8, 389.0, 16.7, device_ms=0.35, pct_device_bound=38.0,
                        kernels=7, extra={"spikingjelly_path": "triton (automatic; not available: cuda)"})]
    lines = bn.format_table(rows).splitlines()
    assert lines[0].endswith("| device ms (kernels) | % of bound (device) | kernels per call |")
    assert lines[2] == "| c | triton | fwd+bwd | 0.90 | 345.0 | 15 | — | — | 0.300 | 44 | 4 |"
    assert lines[-1] == "SpikingJelly's neuron ran as: triton (automatic; not available: cuda)"
