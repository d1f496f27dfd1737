"""plif bench bound (issue 55.1): the products a real training step computes, recorded as ATen sees them
and replayed alone; the bench that times them in turns with the step."""
import pytest
import torch

from plif.bench.products import record_products, replay, summarize
from plif.bench.step_bound import bench_step_bound, format_bound_table
from plif.models import build_network
from plif.train.graph import autocast_context
from plif.train.loop import train_step
from plif.train.optim import adam

NET = "c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF"


def _step(amp=None):
    torch.manual_seed(0)
    net = build_network(NET, (1, 8, 8), 2)
    x, y = torch.rand(3, 1, 8, 8), torch.tensor([1, 2, 3])
    opt, params = adam(net.parameters(), 1e-3), list(net.parameters())
    autocast = None if amp is None else (lambda: autocast_context(x.device, amp))
    return net, lambda: train_step(net, opt, x, y, 10, params, autocast=autocast)


def test_the_fused_steps_products_are_recorded_forward_and_backward():
    _, step = _step()
    step()
    calls = record_products(step)
    names = [c.name for c in calls]
    # the conv's forward (called by the fused block itself, not through nn.Conv2d), its backward, the FC's three
    assert names.count("convolution") == 1 and names.count("convolution_backward") == 1, names
    assert sum(n in ("mm", "addmm") for n in names) == 3, names
    conv = next(c for c in calls if c.name == "convolution")
    assert conv.shapes() == "3x1x8x8:float32 4x1x3x3:float32"  # a static image: the first conv runs once, not T times


def test_recording_changes_nothing_the_step_computes():
    net_a, step_a = _step()
    net_b, step_b = _step()
    step_a()
    record_products(step_b)
    for a, b in zip(net_a.state_dict().values(), net_b.state_dict().values()):
        assert torch.equal(a, b)


def test_the_replay_computes_the_same_products_again():
    _, step = _step()
    step()
    calls = record_products(step)
    assert summarize(record_products(replay(calls))) == summarize(calls)


def test_bf16_autocast_products_are_recorded_in_bf16():
    _, step = _step("bf16")
    step()
    conv = next(c for c in record_products(step) if c.name == "convolution")
    assert conv.shapes().count("bfloat16") == 2


def test_the_bench_times_step_bound_and_spikingjelly_in_turns():
    rows = bench_step_bound("fashion-mnist", batch=2, T=2, precisions=["fp32"], rounds=1, warmup=0,
                            network="c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF")
    (row,) = rows
    assert row.precision == "fp32" and row.products == 5 and row.bound_ms > 0 and row.step_ms > 0
    assert row.over_bound == pytest.approx(row.step_ms / row.bound_ms)
    table = format_bound_table(rows, "t", top=2)
    assert table.splitlines()[3].startswith("fp32") and len(table.splitlines()) == 6


def test_bad_settings_are_refused_in_one_line():
    with pytest.raises(ValueError, match="unknown precision 'fp16'; valid: fp32, bf16"):
        bench_step_bound(precisions=["fp16"], network=NET)
    with pytest.raises(ValueError, match="rounds, batch must be >= 1"):
        bench_step_bound(rounds=0, network=NET)
    with pytest.raises(ValueError, match="unknown model 'resnet-9000'; valid: sew-resnet18"):
        bench_step_bound(model="resnet-9000")


def test_a_narrow_residual_zoo_network_is_measured_without_a_spikingjelly_twin():
    (row,) = bench_step_bound("cifar10", batch=1, T=1, precisions=["fp32"], rounds=1, warmup=0, model="sew-resnet18",
                              width=2)
    # convolutions forward and backward and the classifier's products; a conv of few taps (here the 2-channel
    # ones) is computed by plif's few-tap path as shifted multiply-adds, not an ATen product, and is not counted
    assert row.products > 20 and row.spikingjelly_ms is None and "64 wide, not 2" in row.note
    assert "       - " in format_bound_table([row], "t").splitlines()[3]
    with pytest.raises(ValueError, match="width: the channels of a residual zoo network"):
        bench_step_bound(width=8, network=NET)


def test_an_expanded_argument_is_replayed_with_its_strides():
    # a static image repeated over T is an expand (stride 0 along time): the replay views fresh values so
    weight = torch.rand(4, 2, 3, 3)
    x = torch.rand(2, 8, 8).unsqueeze(0).expand(5, 2, 8, 8)
    calls = record_products(lambda: torch.nn.functional.conv2d(x, weight))
    assert calls[0].args[0].stride == (0, 64, 8, 1)
    replay(calls)()
    assert summarize(record_products(replay(calls))) == summarize(calls)
