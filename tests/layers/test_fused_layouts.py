"""The fused path against the composed layers for every input layout and conv setting it may meet
(issue 45.1): a seeded grid draws the input's layout (contiguous, transposed, strided, sliced,
channels-last, batch-first, expanded over T) and the first block's settings (padding mode, padding,
stride, dilation, groups, a bias, the pool, 1-6 channels, the neuron, T, B, training or evaluation,
fp32 or fp64), and a second block on the first one's spikes draws its padding mode.  For the memory
presets ``fused``, ``exact``, ``low`` and ``spikes`` the outputs, every gradient (the input's, each
convolution's weight and bias, BatchNorm's γ and β, PLIF's w) and BatchNorm's running statistics
must equal ``none``'s (the composed layers) to rounding; where :func:`fused_route` refuses a block,
the composed layers ran, so the same holds."""
import copy
import random

import pytest
import torch
from torch import nn

from plif.layers import TimeFolded
from plif.layers.fused_block import fused_route
from plif.models.memory import MEMORY_PRESETS, make_plan, run_plan
from plif.neurons import IF, LIF, PLIF

PRESETS = ("fused", "exact", "low", "spikes")
MODES = ("zeros", "reflect", "circular", "replicate")
CASES = 56


def _layout(name, T, B, C, H, W, g):
    """``(leaf, x)``: the tensor the gradient reaches and the ``[T, B, C, H, W]`` view of it the block reads."""
    rand = lambda *s: torch.rand(*s, generator=g)  # noqa: E731
    if name == "contiguous":
        leaf = rand(T, B, C, H, W)
        return leaf, lambda t: t
    if name == "transposed":  # H and W swapped in memory
        return rand(T, B, C, W, H), lambda t: t.transpose(-1, -2)
    if name == "strided":
        return rand(T, B, C, 2 * H, 2 * W), lambda t: t[..., ::2, ::2]
    if name == "sliced":
        return rand(T, B + 1, C + 1, H + 2, W + 1), lambda t: t[:, 1:, 1:, 1:-1, :W]
    if name == "channels-last":
        return (rand(T * B, C, H, W).contiguous(memory_format=torch.channels_last),
                lambda t: t.unflatten(0, (T, B)))
    if name == "batch-first":  # [B, T, ...] as a data loader gives it, transposed to time-first
        return rand(B, T, C, H, W), lambda t: t.transpose(0, 1)
    if name == "expanded":  # one frame at every step: stride 0 along time
        return rand(1, B, C, H, W), lambda t: t.expand(T, B, C, H, W)
    raise AssertionError(name)


LAYOUTS = ("contiguous", "transposed", "strided", "sliced", "channels-last", "batch-first", "expanded")


def _draw(i):
    """Case ``i`` of the grid: its settings, drawn from a generator seeded with ``i``.  Even cases are
    ones the fused path takes (training, zero padding, no bias) and odd ones draw those too; the
    layout goes through :data:`LAYOUTS` in turn, so each meets both."""
    r = random.Random(i)
    free = i % 2 == 1
    C = r.choice([1, 1, 2, 3, 4, 6])
    groups = r.choice([g for g in (1, 1, 1, 2, 3) if C % g == 0])
    k, stride, dilation, pad = r.choice([1, 3, 3]), r.choice([1, 1, 2]), r.choice([1, 1, 1, 2]), r.choice([0, 1, 1, 2])
    if k == 1 and C == groups:  # one tap per output: BatchNorm makes the loss blind to its scale, ∂w is rounding
        k = 3
    H, W = r.choice([6, 7, 8]), r.choice([6, 8, 9])
    return dict(C=C, O=groups * r.choice([2, 3]), groups=groups, k=k, stride=stride, dilation=dilation, pad=pad,
                mode=r.choice(MODES) if free else "zeros", bias=free and r.random() < 0.2, pool=r.random() < 0.6,
                H=H, W=W, T=r.choice([1, 2, 3, 5]), B=r.choice([1, 2, 3]), neuron=r.choice(["PLIF", "PLIF", "LIF", "IF"]),
                training=not free or r.random() < 0.7, dtype=torch.float64 if r.random() < 0.4 else torch.float32,
                layout=LAYOUTS[i % len(LAYOUTS)], mode2=r.choice(MODES))


def _neuron(name, channels):
    return {"PLIF": lambda: PLIF(v_threshold=0.3, num_channels=channels), "LIF": lambda: LIF(v_threshold=0.3),
            "IF": lambda: IF(v_threshold=0.3)}[name]()


def _bn(C, g):
    bn = nn.BatchNorm2d(C)
    with torch.no_grad():
        bn.weight.copy_(torch.rand(C, generator=g) + 0.5), bn.bias.copy_(torch.rand(C, generator=g) * 0.4 - 0.2)
        bn.running_mean.copy_(torch.rand(C, generator=g) * 0.2), bn.running_var.copy_(torch.rand(C, generator=g) + 0.5)
    return TimeFolded(bn)


def _layers(c, g):
    torch.manual_seed(int(torch.randint(0, 2**31, (1,), generator=g)))
    conv = nn.Conv2d(c["C"], c["O"], c["k"], c["stride"], c["pad"], c["dilation"], c["groups"], bias=c["bias"],
                     padding_mode=c["mode"])
    first = [TimeFolded(conv), _bn(c["O"], g), _neuron(c["neuron"], c["O"] if c["neuron"] == "PLIF" else 1)]
    if c["pool"]:
        first.append(TimeFolded(nn.MaxPool2d(2, 2)))
    second = [TimeFolded(nn.Conv2d(c["O"], 3, 3, 1, 1, bias=False, padding_mode=c["mode2"])), _bn(3, g),
              PLIF(v_threshold=0.3)]
    layers = [m.to(c["dtype"]) for m in first + second]
    for m in layers:
        m.train(c["training"])
    return layers, len(first)


def _run(layers, preset, leaf, view, weights):
    leaf = leaf.detach().clone().requires_grad_(True)
    out = run_plan(make_plan(layers, MEMORY_PRESETS[preset]), view(leaf))
    (out * weights).sum().backward()
    grads = {f"{i}.{n}": p.grad for i, m in enumerate(layers) for n, p in m.named_parameters()}
    buffers = {f"{i}.{n}": b.clone() for i, m in enumerate(layers) for n, b in m.named_buffers()}
    return out.detach(), leaf.grad, grads, buffers


# Gradients to rounding, relative to their largest value: fp32 1e-3, as a weight gradient that cancels
# (a 1×1 convolution on one channel: ∂y has mean 0 per channel after BatchNorm) amplifies a 1e-7 difference
# of ∂y to 3.5e-4 of its own largest value; fp64 1e-9.  What this test is for gave 0.5 to 2 (issue 45.1).
TOLERANCE = {torch.float32: 1e-3, torch.float64: 1e-9}


def _close(a, b, what, scale=0.0):
    """``a`` within the tolerance of ``b``'s largest value, or of ``scale`` where that is larger."""
    assert (a - b).abs().max() <= TOLERANCE[b.dtype] * max(float(b.abs().max()), scale, 1e-12), what


def _case_fits(c):
    size = lambda n: (n + 2 * c["pad"] - c["dilation"] * (c["k"] - 1) - 1) // c["stride"] + 1  # noqa: E731
    h, w = size(c["H"]), size(c["W"])
    small = min(h, w) >= (2 if c["pool"] else 1) and (c["mode"] != "reflect" or c["pad"] < min(c["H"], c["W"]))
    h2, w2 = (h // 2, w // 2) if c["pool"] else (h, w)  # the second block's
    return small and min(h2, w2) >= 2  # reflect padding needs 2


@pytest.fixture
def one_thread():
    """Tensors of a few hundred elements: one thread (two, on a loaded machine, spin 20x longer)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_fused_path_equals_the_composed_layers_for_every_layout_and_setting(one_thread):
    """56 drawn cases x 4 presets: spikes equal, gradients to rounding (:data:`TOLERANCE`), running
    statistics within 1e-6; the fused path ran where it should (training, zero padding, no bias),
    including its few-tap convolution, and only there."""
    fused_ran, few_layouts = 0, set()
    for i in range(CASES):
        c = _draw(i)
        if not _case_fits(c):
            continue
        g = torch.Generator().manual_seed(i)
        layers, n_first = _layers(c, g)
        leaf, view = _layout(c["layout"], c["T"], c["B"], c["C"], c["H"], c["W"], g)
        leaf = leaf.to(c["dtype"])
        x = view(leaf)
        route = fused_route(layers[:n_first], x)
        expected = c["training"] and not c["bias"] and c["mode"] == "zeros"
        assert (route is not None) == expected, (i, c)
        fused_ran += route is not None
        if route is not None and route.few:
            few_layouts.add(c["layout"])
        with torch.no_grad():
            shape = run_plan(make_plan(copy.deepcopy(layers), MEMORY_PRESETS["none"]), x).shape
        weights = torch.randn(shape, generator=g, dtype=c["dtype"])
        ref = _run(copy.deepcopy(layers), "none", leaf, view, weights)
        assert ref[1].abs().sum() > 0, (i, c)  # a gradient reaches the input
        for preset in PRESETS:
            out, g_x, grads, buffers = _run(copy.deepcopy(layers), preset, leaf, view, weights)
            where = (i, preset, c)
            assert torch.equal(out, ref[0]), where
            _close(g_x, ref[1], (*where, "input"))
            for n, grad in ref[2].items():
                # a bias before BatchNorm has no gradient but rounding: held to its weight's
                scale = float(ref[2][n.replace("bias", "weight")].abs().max()) if n.endswith("layer.bias") else 0.0
                _close(grads[n], grad, (*where, n), scale)
            for n, b in ref[3].items():
                torch.testing.assert_close(buffers[n], b, rtol=1e-6, atol=1e-7, msg=lambda m: f"{where} {n}: {m}")
    assert fused_ran >= 25 and len(few_layouts) == len(LAYOUTS), (fused_ran, few_layouts)


ISSUE_INPUTS = {  # issue 45.1's reproduction: (input channels, the conv's padding mode, the input from a [T, B, C, 8, 8] x)
    "transposed": (1, "zeros", lambda x: x.transpose(-1, -2)),
    "strided": (1, "zeros", lambda x: torch.cat([x, x], -1).repeat_interleave(2, -2)[..., ::2, ::2]),
    "permuted": (1, "zeros", lambda x: x.transpose(0, 1).contiguous().transpose(0, 1)),
    "channels-last": (2, "zeros", lambda x: x.flatten(0, 1).contiguous(memory_format=torch.channels_last).unflatten(
        0, x.shape[:2])),
    "reflect": (1, "reflect", lambda x: x),
    "circular": (1, "circular", lambda x: x),
}


@pytest.mark.parametrize("preset", ["fused", "exact", "low"])
@pytest.mark.parametrize("case", list(ISSUE_INPUTS))
def test_a_few_tap_first_conv_gets_the_composed_gradients_for_any_layout_and_padding_mode(case, preset, one_thread):
    """``build_network("c8k3s1-BN-PLIF-MPk2s2-FC10", (C, 8, 8), 3)`` on a transposed, strided,
    permuted or channels-last input, or with reflect or circular padding: the first conv has few taps
    (the CPU's ATen kernel runs it); its weight's gradient differed from ``--memory none``'s by 0.6-1.3 of
    its largest value (channels-last raised), now within 1e-5."""
    from plif.models import build_network

    C, mode, view = ISSUE_INPUTS[case]
    torch.manual_seed(0)
    net = build_network("c8k3s1-BN-PLIF-MPk2s2-FC10", (C, 8, 8), 3, memory=MEMORY_PRESETS[preset], v_threshold=0.3)
    net.layers[0].layer.padding_mode = mode
    composed = copy.deepcopy(net).set_memory(MEMORY_PRESETS["none"])
    x = view(torch.rand(3, 4, C, 8, 8, generator=torch.Generator().manual_seed(1)))
    grads = []
    for n in (net, composed):
        out = n(x)
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        grads.append((out.detach(), n.layers[0].layer.weight.grad))
    (o1, g1), (o0, g0) = grads
    assert torch.equal(o1, o0) and g0.abs().max() > 0
    assert (g1 - g0).abs().max() <= 1e-5 * g0.abs().max()
