"""``benchmarks/bench_cpu_amp.py`` (issue 49's measurement of bf16 against fp32): it runs plif's own
training step both ways, alternated, and writes what it measured."""
import importlib.util
import json
from pathlib import Path

import pytest
import torch

_spec = importlib.util.spec_from_file_location(
    "bench_cpu_amp", Path(__file__).parents[2] / "benchmarks" / "bench_cpu_amp.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


@pytest.mark.slow  # four steps of a narrow network at batch 2: ~2 s
def test_both_steps_alternate_and_their_times_and_ratios_are_written(tmp_path, capsys):
    out = tmp_path / "amp.json"
    threads = torch.get_num_threads()  # the benchmark sets its own: give this worker's back
    try:
        code = bench.main(["--network", "{c4k3s1-BN-PLIF-MPk2s2}*2-DP-FC16-PLIF-DP-FC100-PLIF-APk10s10", "--batch", "2",
                           "--T", "2", "--rounds", "2", "--warmup", "0", "--json", str(out)])
    finally:
        torch.set_num_threads(threads)
    assert code == 0
    got = json.loads(out.read_text())
    assert got["T"] == 2 and got["batch"] == 2 and got["threads"] == 1 and got["memory"] == "fused"
    for clock in ("cpu_s", "wall_s"):
        assert set(got[clock]) == {"fp32", "bf16"} and all(len(v) == 2 and min(v) > 0 for v in got[clock].values())
    ratios = [b / a for a, b in zip(got["cpu_s"]["fp32"], got["cpu_s"]["bf16"])]
    assert min(ratios) <= got["ratio_median"] <= max(ratios) and got["wall_ratio_median"] > 0
    assert "bf16 / fp32 CPU time" in capsys.readouterr().out
