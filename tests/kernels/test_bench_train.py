"""``plif bench train`` variants: CPU rows, CUDA-only variants refuse on CPU, unknown names fail."""
import re

import pytest

from plif.bench.train import bench_train


def test_cpu_variants_give_rows_with_ratios():
    rows = bench_train("fashion-mnist", (2,), "cpu", ["naive", "auto", "auto+bf16"], warmup=0, iters=1, T=1)
    assert [(r.variant, r.batch) for r in rows] == [("naive", 2), ("auto", 2), ("auto+bf16", 2)]
    naive, auto, _ = rows
    assert auto.samples_per_s == pytest.approx(2 / (auto.ms_per_step / 1e3))
    assert auto.ratio_to_naive == pytest.approx(naive.ms_per_step / auto.ms_per_step)  # the other row's time


def test_bf16_rows_stand_beside_fp32_and_meet_spikingjelly_in_bf16(monkeypatch):
    """The default rows add plif's and SpikingJelly's bf16 where the device runs it natively (never on
    a CPU without it), the table names each row's precision, and a bf16 row's "x SJ" is against
    SpikingJelly's own bf16 row."""
    import torch

    from plif.bench import train as bt
    from plif.layers import precision

    monkeypatch.setattr(precision, "native_bf16", lambda: False)
    assert not any("bf16" in v for v in bt.default_variants(torch.device("cpu")))
    monkeypatch.setattr(precision, "native_bf16", lambda: True)
    assert bt.default_variants(torch.device("cpu"))[-1] == "spikingjelly+bf16" and "auto+bf16" in bt.default_variants(
        torch.device("cpu"))
    rows = [bt.TrainBenchResult(v, 2, ms, 2 / ms, precision=p) for v, ms, p in
            (("auto", 10.0, "fp32"), ("auto+bf16", 5.0, "bf16"), ("spikingjelly", 40.0, "fp32"),
             ("spikingjelly+bf16", 30.0, "bf16"))]
    auto, bf16, _, _ = bt.fill_ratios(rows)
    assert auto.ratio_to_spikingjelly == 4.0 and bf16.ratio_to_spikingjelly == 6.0
    assert re.search(r"auto\+bf16 +bf16 +2 +5\.00", bt.format_train_table(rows, "t"))


@pytest.mark.parametrize("variant", ["cuda-graph", "cuda-graph+bf16", "auto+graph", "spikingjelly+graph"])
def test_cuda_variants_refuse_on_cpu(variant):
    with pytest.raises(ValueError, match=re.escape(f"variant {variant!r} needs a CUDA device")):
        bench_train("fashion-mnist", (2,), "cpu", [variant])


def test_unknown_variant():
    with pytest.raises(ValueError, match="unknown variant 'fast'; valid: naive, bptt, auto"):
        bench_train("fashion-mnist", (2,), "cpu", ["fast"])


def test_event_datasets_get_frames_and_static_ones_a_repeated_image():
    from plif.bench.train import _inputs
    from plif.catalog import get_dataset

    x, xs, y = _inputs(get_dataset("dvs128-gesture"), 3, 2, "cpu")
    assert x.shape == (3, 2, 2, 128, 128) and xs is x and y.shape == (2,)
    assert x.min() >= 0 and float(x.mean()) == pytest.approx(0.3, abs=0.01)  # Poisson event counts
    x, xs, y = _inputs(get_dataset("fashion-mnist"), 3, 2, "cpu")
    assert x.shape == (2, 1, 28, 28) and xs.shape == (3, 2, 1, 28, 28) and bool((xs == x).all())


def test_kernels_need_cuda_and_the_deadline_stops_rows():
    rows = bench_train("fashion-mnist", (2,), "cpu", ["auto", "naive"], warmup=0, iters=1, T=1, deadline=0.0)
    assert [(r.ms_per_step, r.note) for r in rows] == [(None, "not run: time budget spent")] * 2
    rows = bench_train("fashion-mnist", (2,), "cpu", ["auto"], warmup=0, iters=1, T=1)
    assert rows[0].ms_per_step > 0 and rows[0].kernels is None and rows[0].kernel_ms is None


def test_spikingjelly_rows_name_the_implementation_that_ran():
    from plif.bench.spikingjelly import spikingjelly_unavailable
    from plif.bench.train import format_train_table

    if spikingjelly_unavailable():
        pytest.skip(f"SpikingJelly: {spikingjelly_unavailable()}")
    rows = bench_train("fashion-mnist", (2,), "cpu", ["spikingjelly"], warmup=0, iters=1, T=1)
    assert rows[0].ms_per_step > 0 and rows[0].note == "SpikingJelly neuron: torch-reference (automatic)"
    assert format_train_table(rows, "t").splitlines()[-1] == rows[0].note


def test_the_cuda_variants_build_the_product_step(monkeypatch):
    """What the CUDA-only plif variants build, run once on the CPU with capture off: compile+graph is
    plif train's graph trainer with the compiled network inside, channels-last builds its network
    under the switch, and --memory reaches the network."""
    import functools

    import torch

    from plif.bench import train as bt
    from plif.catalog import get_dataset

    built = []
    trainer = functools.partial(bt.GraphTrainer, capture=False)
    monkeypatch.setattr(bt, "GraphTrainer", lambda *a, **kw: built.append((a[0], kw)) or trainer(*a, **kw))
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="eager"))  # no Inductor here
    entry = get_dataset("fashion-mnist")
    x, xs, y = bt._inputs(entry, 1, 2, "cpu")
    net = "c4k3s1-BN-PLIF-c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF"
    for v in ("cuda-graph", "compile+graph", "cuda-graph+bf16+channels-last"):
        bt._build_step(v, entry, 1, x, xs, y, torch.device("cpu"), net, memory="exact")[0]()
    (_, plain), (model, compiled), (cl_model, cl) = built
    assert plain["net"] is None and plain["amp"] is None and cl["amp"] == "bf16"
    assert type(compiled["net"]).__name__ == "OptimizedModule" and compiled["net"]._orig_mod is model
    assert model.memory.spike_storage  # --memory exact reached the network
    conv = lambda m: m.layers[3].layer.weight  # noqa: E731  (the second conv: 4 input channels)
    assert conv(cl_model).is_contiguous(memory_format=torch.channels_last)
    assert not conv(model).is_contiguous(memory_format=torch.channels_last)
    assert bt.memory_choice(None) == ("fused", bt.memory_choice("fused")[1])  # plif train's default


def test_auto_none_runs_the_composed_layers_and_auto_the_fused_blocks(monkeypatch):
    """``auto`` times what ``plif train`` runs (the fused blocks), ``auto+none`` and ``naive`` the
    composed layers."""
    from plif.bench import train as bt
    from plif.catalog import get_dataset
    from plif.layers.fused_block import FusedBlock
    from plif.models import build_network

    built = []

    def spy(*args, **kwargs):
        built.append(build_network(*args, **kwargs))
        return built[-1]
    monkeypatch.setattr(bt, "build_network", spy)
    entry = get_dataset("dvs128-gesture")
    x, xs, y = bt._inputs(entry, 1, 1, "cpu")
    for v in ("auto", "auto+none", "naive"):
        bt._build_step(v, entry, 1, x, xs, y, "cpu", network="c4k3s1-BN-PLIF-MPk2s2-FC110-PLIF-APk10s10")
    assert [any(isinstance(s, FusedBlock) for _, _, s in net.plan()) for net in built] == [True, False, False]
