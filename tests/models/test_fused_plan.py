"""The fused conv blocks in a network's plan (the training default, ``--memory fused``) against the
composed layers (``--memory none``), on narrow versions of the zoo's networks."""
import copy

import pytest
import torch

from plif.layers.fused_block import FusedBlock
from plif.layers.time_chunked import TimeChunkedBlock
from plif.catalog import DATASETS
from plif.models import build_network
from plif.models.memory import DEFAULT_MEMORY, MEMORY_PRESETS, MemoryOptions, fused_run
from plif.train.config import MEMORY_CHOICES, TrainConfig
from plif.train.loop import train_step
from plif.train.optim import adam
from plif_testing import narrow_zoo

# SHD / SSC's fully connected networks hold no conv block to fuse
FORMS = [n for n, d in DATASETS.items() if n != "ncaltech101" and len(d.input_shape) == 3]
THRESHOLD = 0.2  # every layer of the narrow networks fires within T = 3


def _inputs(name, shape, T=3, B=3):
    g = torch.Generator().manual_seed(2)
    x = torch.rand(B, *shape, generator=g) if not DATASETS[name].is_event else (
        torch.rand(T, B, *shape, generator=g) > 0.7).float()
    return x, torch.randint(0, 32, (B,), generator=g)


def _pair(name):
    spec, shape = narrow_zoo(name)
    torch.manual_seed(0)
    fused = build_network(spec, shape, 3, v_threshold=THRESHOLD)
    composed = copy.deepcopy(fused).set_memory(MEMORY_PRESETS["none"])
    return fused, composed, shape


@pytest.mark.parametrize("name", FORMS)
def test_one_training_step_equals_the_composed_layers(name):
    """``plif train``'s step (Adam included) once each way: the same loss and spikes, every gradient
    within 1e-4 of its largest value (measured at most 6e-6), running statistics within 1e-6."""
    fused, composed, shape = _pair(name)
    x, y = _inputs(name, shape)
    assert sum(isinstance(s, FusedBlock) for _, _, s in fused.plan()) == sum(
        bool(fused_run(list(fused.layers), i)) for i in range(len(fused.layers))) > 0
    out = {}
    for key, net in (("fused", fused), ("none", composed)):
        opt = adam(net.parameters(), 1e-3)
        spikes = []
        hook = net.layers[-1].register_forward_hook(lambda m, i, o: spikes.append(o.detach()))
        torch.manual_seed(7)  # the same dropout masks
        loss, correct, ok = train_step(net, opt, x, y, 32)
        hook.remove()
        out[key] = (loss, spikes[0], {n: p.grad.clone() for n, p in net.named_parameters()},
                    {n: p.detach().clone() for n, p in net.named_parameters()},
                    {n: b.clone() for n, b in net.named_buffers()}, bool(ok))
    (l1, s1, g1, p1, b1, ok1), (l0, s0, g0, p0, b0, ok0) = out["fused"], out["none"]
    assert ok0 and ok1 and torch.equal(l1, l0) and torch.equal(s1, s0) and s0.sum() > 0
    for n in g0:
        assert (g1[n] - g0[n]).abs().max() <= 1e-4 * g0[n].abs().max().clamp_min(1e-12), n
        torch.testing.assert_close(p1[n], p0[n], rtol=1e-4, atol=1e-6)
    for n in b0:
        torch.testing.assert_close(b1[n].double(), b0[n].double(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["dvs128-gesture", "spikes-in"])
def test_few_tap_convs_in_eval_mode_under_a_training_batchnorm_equal_the_composed_layers(name):
    """Convolutions in eval mode while their BatchNorm trains: a few-tap conv's output is made again in
    backward as in training (the first conv; the second reads spikes, 2 channels), with and without
    the one-byte spike storage: the composed layers' spikes, gradients to rounding; without gradients
    the same spikes too."""
    if name == "spikes-in":
        torch.manual_seed(0)
        fused = build_network("c2k3s1-BN-PLIF-c3k3s1-BN-PLIF-MPk2s2-FC10-PLIF", (2, 8, 8), 3, v_threshold=THRESHOLD)
        nets = [fused, copy.deepcopy(fused).set_memory(MEMORY_PRESETS["none"]),
                copy.deepcopy(fused).set_memory(MemoryOptions(fused_block=True))]
        x = (torch.rand(3, 3, 2, 8, 8, generator=torch.Generator().manual_seed(2)) > 0.6).float()
    else:
        fused, composed, shape = _pair(name)
        nets, x = [fused, composed], _inputs(name, shape)[0]
    results = []
    for net in nets:
        for m in net.modules():
            if isinstance(m, torch.nn.Conv2d):
                m.eval()
        torch.manual_seed(7)  # the same dropout masks
        out = net(x)
        out.square().sum().backward()
        with torch.no_grad():
            again = net(x)
        results.append((out.detach(), again, {n: p.grad for n, p in net.named_parameters()}))
    o0, a0, g0 = results[1]
    assert o0.sum() > 0 and all(g.abs().sum() > 0 for n, g in g0.items() if n.endswith("layer.weight"))
    for o1, a1, g1 in results[:1] + results[2:]:
        assert torch.equal(o1, o0) and torch.equal(a1, a0)
        for n in g0:
            assert (g1[n] - g0[n]).abs().max() <= 1e-4 * g0[n].abs().max().clamp_min(1e-12), n


@pytest.mark.parametrize("name", ["cifar10", "dvs128-gesture"])
def test_evaluation_runs_the_composed_layers_bit_for_bit(name):
    fused, composed, shape = _pair(name)
    x, _ = _inputs(name, shape)
    fused.train()(x if x.dim() == 5 else x)  # running statistics away from their start
    composed.load_state_dict(fused.state_dict())
    fused.eval(), composed.eval()
    with torch.no_grad():
        assert torch.equal(fused(x), composed(x))


def test_compiles_fullgraph_with_fused_blocks_and_changing_batch():
    """``torch.compile(fullgraph=True)`` traces the fused blocks (custom operators inside an
    ``autograd.Function``) with a symbolic batch: the same spikes and gradients as eager."""
    fused, _, shape = _pair("cifar10-dvs")
    assert any(isinstance(s, FusedBlock) for _, _, s in fused.plan())
    torch._dynamo.reset()
    compiled = torch.compile(fused, fullgraph=True, backend="aot_eager")
    for B in (3, 2):
        x, _ = _inputs("cifar10-dvs", shape, B=B)
        res = []
        for f in (fused, compiled):
            fused.zero_grad(set_to_none=True)
            torch.manual_seed(3)
            o = f(x)
            (o.mean(0) ** 2).sum().backward()
            res.append((o.detach(), [p.grad.clone() for p in fused.parameters()]))
        assert torch.equal(res[0][0], res[1][0])
        for a, b in zip(res[0][1], res[1][1]):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_training_defaults_to_the_fused_preset():
    # left to plif: fused, except where plif.train.speed compiles the composed layers inside the CUDA graph
    assert TrainConfig().memory is None and DEFAULT_MEMORY == "fused" and set(MEMORY_CHOICES) <= set(MEMORY_PRESETS)
    assert TrainConfig().memory_options() == MEMORY_PRESETS["fused"]
    net = build_network("c8k3s1-BN-PLIF-MPk2s2-FC10-PLIF", (2, 8, 8), 2)
    assert isinstance(net.plan()[0][2], FusedBlock) and net.memory == MEMORY_PRESETS[DEFAULT_MEMORY]
    low = build_network("c8k3s1-BN-PLIF-MPk2s2-FC10-PLIF", (2, 8, 8), 2, memory=MEMORY_PRESETS["low"])
    assert isinstance(low.plan()[0][2], TimeChunkedBlock)


@pytest.mark.parametrize("dtype,autocast", [(torch.float16, None), (torch.float32, torch.float16),
                                            (torch.float64, None)], ids=["half", "fp16-autocast", "double"])
def test_a_dtype_the_kernels_do_not_take_runs_the_composed_layers(dtype, autocast):
    """The CPU kernels take fp32, fp64 and bf16: an fp16 network (``.half()``, or fp16 autocast)
    trains through the composed layers (the same step bit for bit as ``--memory none``), an fp64 one
    through the kernels (the composed layers' step to rounding).  On CUDA the Triton kernels refuse
    fp64 in the same way (``test_fused_block``)."""
    spec, shape = "c8k3s1-BN-PLIF-MPk2s2-c8k3s1-BN-PLIF-FC10-PLIF", (2, 8, 8)
    torch.manual_seed(0)
    fused = build_network(spec, shape, 3, v_threshold=THRESHOLD).to(dtype)
    composed = copy.deepcopy(fused).set_memory(MEMORY_PRESETS["none"])
    assert sum(isinstance(s, FusedBlock) for _, _, s in fused.plan()) == 2
    x = torch.rand(3, *shape, generator=torch.Generator().manual_seed(2)).to(dtype)
    res = []
    for net in (fused, composed):
        with torch.autocast("cpu", autocast, enabled=autocast is not None):
            out = net(x)
        out.float().square().sum().backward()
        res.append((out.detach(), [p.grad.clone() for p in net.parameters()]))
    (o1, g1), (o0, g0) = res
    assert o0.sum() > 0 and all(g.abs().sum() > 0 for g in g0)
    if dtype == torch.float64:
        assert torch.equal(o1, o0)
        for a, b in zip(g1, g0):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)
    else:
        assert torch.equal(o1, o0) and all(torch.equal(a, b) for a, b in zip(g1, g0))


@pytest.mark.parametrize("channels", [4, 2], ids=["36-taps", "few-taps"])
@pytest.mark.parametrize("hooked", ["wrapper", "conv"])
def test_a_hooked_conv_runs_the_composed_layers(monkeypatch, channels, hooked):
    """A forward hook on a block's conv (its ``TimeFolded`` wrapper or the ``Conv2d`` inside) sees
    the conv's output, as one on BatchNorm or the neuron sees theirs: fused, ∂y was written over
    that output in backward (here at any size), and a few-tap first conv on the CPU was computed
    without its module (the hook never ran)."""
    import plif.layers.fused_block as fb

    monkeypatch.setattr(fb, "_FRESH_BYTES", 0)
    torch.manual_seed(0)
    net = build_network("c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF", (channels, 8, 8), 2, v_threshold=THRESHOLD)
    assert isinstance(net.plan()[0][2], FusedBlock)
    x = torch.rand(2, 3, channels, 8, 8, generator=torch.Generator().manual_seed(2))  # [T, B, ...]: not hoisted
    seen = []
    module = net.layers[0] if hooked == "wrapper" else net.layers[0].layer
    module.register_forward_hook(lambda m, i, o: seen.append((o, o.detach().clone())))
    net(x).square().sum().backward()
    assert len(seen) == 1 and torch.equal(seen[0][0], seen[0][1])
