import math

import pytest

from plif.bench.memory import MemoryResult, fit_batches, format_memory_table, measure


def _r(config, batch, peak, step=1.0, network="cifar10-dvs"):
    return MemoryResult(network, config, batch, 20, peak, 300.0, step)


def test_fit_derives_the_largest_batch_from_the_slope():
    rows = [_r("naive", 1, 1300.0), _r("naive", 2, 2300.0), _r("all", 1, 700.0), _r("all", 3, 1100.0)]
    fits = fit_batches(rows, 24 * 1024)
    assert fits[("cifar10-dvs", "naive")] == {"mb_per_sample": 1000.0, "intercept_mb": 300.0, "max_batch": 24}
    assert fits[("cifar10-dvs", "all")]["max_batch"] == math.floor((24 * 1024 - 500) / 200)


def test_table_ratios_and_failed_rows():
    rows = [_r("naive", 1, 1300.0, 50.0), _r("naive", 2, 2300.0, 100.0), _r("default", 1, 900.0, 8.0),
            _r("default", 2, 1200.0, 10.0), _r("all", 1, 600.0, 11.0),
            MemoryResult("cifar10-dvs", "all", 2, 20, math.nan, math.nan, math.nan, error="killed")]
    table = format_memory_table(rows, 24 * 1024)
    lines = table.splitlines()
    assert lines[0].startswith("| network | configuration | peak B=1 (MB) | peak B=2 (MB)")
    assert "| cifar10-dvs | default | 900 | 1,200 | - | 300 | 79 | 10.00 | 0.52 | 1.00 |" in lines
    assert "| cifar10-dvs | all | 600 | - | - | - | - | - | - | - |" in lines


def test_live_peak_is_the_headline_and_the_default_allocator_is_measured_beside_it(monkeypatch):
    """Each configuration runs once with the 128 KB mmap threshold (the live peak, the table's
    figure) and once with glibc's default allocator (shown in its own column)."""
    import plif.bench.memory as mem

    calls = []

    def fake(network, config, batch, T, steps, device, threads, mmap_threshold=None, timeout=None):
        calls.append(mmap_threshold)
        return MemoryResult(network, config, batch, T, 1000.0 if mmap_threshold else 4400.0, 300.0, 1.0)

    monkeypatch.setattr(mem, "measure", fake)
    rows = mem.bench_memory(["cifar10-dvs"], ["exact"], (2,), log=lambda *a: None)
    assert calls == [mem.LIVE_MMAP_THRESHOLD, None]
    assert rows[0].peak_mb == 1000.0 and rows[0].rss_default_mb == 4400.0
    assert "| cifar10-dvs | exact | 1,000 | 4,400 |" in format_memory_table(rows, 1024)


@pytest.mark.slow
def test_measure_runs_a_fresh_process():
    """A real (tiny: T=1, one step) measurement of the every-saving configuration in a subprocess."""
    r = measure("cifar10-dvs", "all", 1, T=1, steps=1, threads=1, timeout=300)
    assert r.error is None, r.error
    assert r.peak_mb > r.base_mb > 50 and r.step_s > 0


def test_measure_reports_a_failing_configuration():
    r = measure("cifar10-dvs", "no-such-config", 1, T=1, steps=1, threads=1, timeout=300)
    assert r.error and math.isnan(r.peak_mb)


def test_spikingjelly_twin_has_the_same_shapes():
    from plif.bench.spikingjelly import spikingjelly_unavailable
    from plif.bench.twin import spikingjelly_twin

    if spikingjelly_unavailable():  # the whole import chain (loguru, ...), not only the top package
        pytest.skip(f"SpikingJelly: {spikingjelly_unavailable()}")
    import torch

    from plif.models import build_network
    net = build_network("c4k3s1-BN-PLIF-MPk2s2-DP-FC20-PLIF-APk10s10", (2, 8, 8), 2)
    sj, reset = spikingjelly_twin(net)
    assert sum(p.numel() for p in sj.parameters()) == sum(p.numel() for p in net.parameters())
    assert sj(torch.rand(2, 3, 2, 8, 8)).shape == (2, 3, 2)
    reset(sj)


def test_each_configuration_gets_a_share_of_the_time_left(monkeypatch):
    """The H100 run gave five configurations 75 s in all and the last never ran: now each gets an equal
    share of what is left, a fast one leaves its share to the rest, and one that hangs is stopped
    at its share, so the ones after it still run."""
    import plif.bench.memory as mem

    clock = [0.0]
    monkeypatch.setattr(mem.time, "monotonic", lambda: clock[0])
    limits = []
    needs = {"naive": 10.0, "default": 5.0, "low": math.inf, "exact": 8.0}  # "low" hangs

    def fake(network, config, batch, T, steps, device, threads, mmap_threshold=None, timeout=None):
        limits.append(timeout)
        clock[0] += min(needs[config], timeout)
        if needs[config] > timeout:
            return MemoryResult(network, config, batch, T, math.nan, math.nan, math.nan, error=f"timed out after {timeout:.0f} s")
        return MemoryResult(network, config, batch, T, 1000.0, 300.0, 1.0)

    monkeypatch.setattr(mem, "measure", fake)
    rows = mem.bench_memory(["dvs128-gesture"], list(needs), (16,), device="cuda", log=lambda *a: None,
                            timeout=50, deadline=100.0)
    assert limits == [25.0, 30.0, 42.5, 42.5]  # min(timeout, time left / configurations not yet run)
    assert [r.error for r in rows] == [None, None, "timed out after 42 s", None]
    rows = mem.bench_memory(["dvs128-gesture"], ["naive"], (16,), device="cuda", log=lambda *a: None, deadline=0.0)
    assert rows[0].error == "not run: time budget spent" and len(limits) == 4


def test_measure_stops_a_worker_at_its_timeout():
    r = measure("cifar10-dvs", "all", 1, T=1, steps=1, threads=1, timeout=0.5)
    assert r.error == "timed out after 0 s" and math.isnan(r.peak_mb)


def test_configurations_train_the_plans_they_name():
    """``default`` is what ``plif train`` runs (the fused blocks), ``none`` and ``naive`` the composed
    layers, a preset its own options."""
    from plif.bench.memory import CONFIGS, config_memory
    from plif.models import MEMORY_PRESETS, MemoryOptions
    from plif.train.config import TrainConfig

    assert config_memory("default") == TrainConfig().memory_options() and config_memory("default").fused_block
    assert config_memory("none") == config_memory("naive") == MemoryOptions()
    assert all(config_memory(c) == MEMORY_PRESETS[c] for c in CONFIGS if c in MEMORY_PRESETS)
