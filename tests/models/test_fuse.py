"""``plif.fuse`` on networks written by hand: the fused runs against the model as written (the
notation networks' statement: the same loss and spikes, every gradient within 1e-4 of its largest
value, running statistics within 1e-6), the same state dict, parameters and optimizer, the names
``fused_blocks`` gives, a static input's hoisted first convolution, and the memory modes."""
import copy
import importlib.util
import io
import pickle
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import plif
from plif.layers import TimeFolded
from plif.layers.fused_block import FusedBlock
from plif.layers.spike_input import SpikeConv2d, SpikeLinear
from plif.models import MEMORY_PRESETS
from plif.models.fusion import FusedSequential
from plif.train.config import MEMORY_CHOICES
from plif.train.loop import train_step
from plif.train.optim import adam

_spec = importlib.util.spec_from_file_location("fuse_nets", Path(__file__).parents[2] / "benchmarks" / "fuse_nets.py")
nets = sys.modules["fuse_nets"] = importlib.util.module_from_spec(_spec)  # importable: pickles name it
_spec.loader.exec_module(nets)

THRESHOLD = 0.2  # every layer of the narrow networks fires within T = 3


def _paper():
    torch.manual_seed(0)
    return nets.paper_net(c=6, hidden=32, size=12, v_threshold=THRESHOLD)


def _resnet():
    torch.manual_seed(0)
    return nets.ResNet(c=4, size=8, in_channels=2, v_threshold=THRESHOLD)


CASES = {"sequential": (_paper, lambda g: torch.rand(3, 1, 12, 12, generator=g)),
         "residual": (_resnet, lambda g: (torch.rand(3, 3, 2, 8, 8, generator=g) > 0.6).float())}


def _input(case, static=True):
    g = torch.Generator().manual_seed(2)
    x = CASES[case][1](g)
    if case == "sequential":  # a static image fed at every step, as a stride-0 view
        x = x.unsqueeze(0).expand(3, *x.shape)
        return x if static else x.contiguous()
    return x


def _step(net, x):
    """One ``plif train`` step (MSE on the rate, Adam): loss, output spikes, gradients, parameters
    after the update, buffers."""
    opt = adam(net.parameters(), 1e-3)
    torch.manual_seed(7)  # the same dropout masks
    spikes = []
    net.register_forward_hook(lambda m, i, o: spikes.append(o.detach()))  # on the whole model: nothing runs as written
    loss, _, ok = train_step(net, opt, x, torch.arange(3) % 10, 10)
    grads = {n: p.grad.clone() for n, p in net.named_parameters()}
    assert ok
    return (loss, spikes[0], grads, {n: p.detach().clone() for n, p in net.named_parameters()},
            {n: b.clone() for n, b in net.named_buffers()})


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("memory", ["fused", "exact"])
def test_a_fused_training_step_equals_the_model_as_written(case, memory):
    written = CASES[case][0]()
    fused = plif.fuse(copy.deepcopy(written), memory)
    assert len(plif.fused_blocks(fused)) == (2 if case == "sequential" else 7)
    x = _input(case)
    (l1, s1, g1, p1, b1), (l0, s0, g0, p0, b0) = _step(fused, x), _step(written, x)
    assert torch.equal(l1, l0) and torch.equal(s1, s0) and s0.sum() > 0
    for n in g0:
        assert (g1[n] - g0[n]).abs().max() <= 1e-4 * g0[n].abs().max().clamp_min(1e-12), n
        torch.testing.assert_close(p1[n], p0[n], rtol=1e-4, atol=1e-6)
    for n in b0:
        torch.testing.assert_close(b1[n].double(), b0[n].double(), rtol=1e-6, atol=1e-7)


def test_fused_blocks_names_each_run_by_its_qualified_names():
    net = plif.fuse(_resnet())
    assert plif.fused_blocks(net) == [
        ("conv1", "bn1", "sn1"), ("layer1.0.conv1", "layer1.0.bn1", "layer1.0.sn1"),
        ("layer1.0.conv2", "layer1.0.bn2", "layer1.0.sn2"),
        ("layer1.0.shortcut.0", "layer1.0.shortcut.1", "layer1.0.shortcut.2"),
        ("layer2.0.conv1", "layer2.0.bn1", "layer2.0.sn1"), ("layer2.0.conv2", "layer2.0.bn2", "layer2.0.sn2"),
        ("layer2.0.shortcut.0", "layer2.0.shortcut.1", "layer2.0.shortcut.2")]
    assert plif.fused_blocks(plif.fuse(_paper())) == [("0", "1", "2", "3"), ("4", "5", "6", "7")]
    assert plif.fused_blocks(_resnet()) == [] and plif.fused_blocks(plif.fuse(_resnet(), "none")) == []


def test_the_state_dict_parameters_and_an_earlier_optimizer_stay():
    net = _resnet()
    keys, params, buffers = list(net.state_dict()), list(net.parameters()), list(net.buffers())
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    before = net.layer1[0].conv2.layer.weight.detach().clone()
    assert plif.fuse(net) is net and isinstance(net, nn.Module) and type(net).__name__ == "ResNet"
    assert list(net.state_dict()) == keys
    assert all(a is b for a, b in zip(net.parameters(), params)) and len(list(net.parameters())) == len(params)
    assert all(a is b for a, b in zip(net.buffers(), buffers))
    sd = net.state_dict(keep_vars=True)
    assert all(any(sd[k] is p for k in keys) for p in params)
    net(_input("residual")).sum().backward()
    opt.step()
    assert not torch.equal(net.layer1[0].conv2.layer.weight, before)  # the fused step's gradient reached it
    written = _resnet()
    written.load_state_dict(net.state_dict())  # a checkpoint of either loads into the other
    net.load_state_dict(written.state_dict())
    for a, b in zip(written.state_dict().values(), net.state_dict().values()):
        assert torch.equal(a, b)


def test_the_sequential_keeps_its_children_and_names():
    net = _paper()
    keys, children = list(net.state_dict()), list(net)
    plif.fuse(net)
    assert list(net.state_dict()) == keys and all(a is b for a, b in zip(net, children))
    assert isinstance(net, nn.Sequential)


def test_a_static_input_goes_through_the_first_convolution_once():
    """A stride-0 ``expand`` of an image: the first convolution runs on ``[B, ...]``, the output and
    every gradient those of the contiguous repeat, bit for bit (the notation network's static input)."""
    net = plif.fuse(_paper())
    conv = net[0].layer
    seen = []
    forward = conv.forward
    conv.forward = lambda x: seen.append(tuple(x.shape)) or forward(x)
    x = _input("sequential")
    torch.manual_seed(7)  # the same dropout masks
    out = net(x)
    assert seen == [(3, 1, 12, 12)]  # B, not T*B
    out.sum().backward()
    grads = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    torch.manual_seed(7)
    again = net(x.contiguous())
    again.sum().backward()
    assert torch.equal(out, again)
    for g, p in zip(grads, net.parameters()):
        torch.testing.assert_close(g, p.grad, rtol=1e-5, atol=1e-6)


def test_layers_fed_spikes_keep_them_as_one_byte():
    net = plif.fuse(_resnet())
    steps = {run.names[0]: run.plan([net.get_submodule(n) for n in run.names]) for run in net._plif_runs}
    blocks = {first: [s for _, _, s in plan if isinstance(s, FusedBlock)] for first, plan in steps.items()}
    assert [b.binary for b in blocks["conv1"]] == [False]  # the stem reads the input
    assert [b.binary for b in blocks["layer1.0.conv1"]] == [True, True]  # the block's convs read spikes
    assert all(isinstance(b.conv_step, SpikeConv2d) for b in blocks["layer1.0.conv1"])
    assert [b.binary for b in blocks["layer1.0.shortcut.0"]] == [True]
    assert [b.binary for b in blocks["layer2.0.conv1"]] == [False, True]  # a sum of spikes is not binary
    paper = plif.fuse(_paper())
    plan = paper._plif_runs[0].plan(list(paper))  # dropout → linear: the spikes in one byte, the mask beside
    assert sum(isinstance(getattr(s, "fc", s), SpikeLinear) for _, _, s in plan) == 2


def test_a_1x1_shortcut_is_not_run_as_a_few_tap_convolution():
    """A residual network's 1×1 downsampling conv on 32 channels is within the few-tap limit but is a
    matrix product: ATen's unfolding kernel made the fused residual network slower than as written."""
    from plif.layers.few_tap_conv import few_taps

    x = torch.rand(4, 32, 8, 8)
    assert not few_taps(nn.Conv2d(32, 64, 1, 2, bias=False), x)
    assert few_taps(nn.Conv2d(2, 64, 3, 1, 1, bias=False), x[:, :2])  # the event input's first conv still is


def _explained(model, memory="fused"):
    return plif.fuse(model, memory, explain=True)[1]


class _Twice(nn.Module):
    def __init__(self, bias=False, bn=None, pool=None, neuron=None, conv=None):
        super().__init__()
        self.conv = TimeFolded(conv or nn.Conv2d(2, 4, 3, padding=1, bias=bias))
        self.bn = TimeFolded(bn or nn.BatchNorm2d(4))
        self.sn = neuron or plif.PLIF()
        self.pool = TimeFolded(pool or nn.MaxPool2d(2, 2))

    def forward(self, x):
        return self.pool(self.sn(self.bn(self.conv(x))))


class _Branch(nn.Module):
    def __init__(self, what):
        super().__init__()
        self.what, self.inner = what, _Twice()

    def forward(self, x):
        m = self.inner
        y = m.conv(x)
        if self.what == "conv":
            return m.sn(m.bn(y)) + y
        z = m.bn(y)
        return m.sn(z) * z


class _Moody(_Twice):
    def forward(self, x):
        if self.training:
            return self.sn(self.bn(self.conv(x)))
        return self.sn(self.conv(x))


class _Gate(nn.Module):
    def forward(self, x):
        return x if x.sum() >= 0 else -x  # a branch on a value: FX cannot trace it


class _Untraceable(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(*nets.conv_bn(2, 4), plif.PLIF(), _Gate())

    def forward(self, x):
        return self.body(x)


class _NotPlifNeuron(plif.PLIF):
    pass


@pytest.mark.parametrize("model,expected", [
    (lambda: _Twice(bias=True), "conv → bn → sn: not fused: the convolution has a bias"),
    (lambda: _Twice(conv=nn.Conv2d(2, 4, 3, padding=1, bias=False, padding_mode="reflect")),
     "conv → bn → sn: not fused: padding_mode='reflect'"),
    (lambda: _Twice(bn=nn.BatchNorm2d(4, track_running_stats=False)), "conv → bn → sn: not fused: BatchNorm without running statistics"),
    (lambda: _Twice(bn=nn.BatchNorm2d(4, momentum=None)), "conv → bn → sn: not fused: BatchNorm without running statistics"),
    (lambda: _Twice(neuron=_NotPlifNeuron()), "not fused: a _NotPlifNeuron follows the BatchNorm, not an IF, LIF or PLIF"),
    (lambda: _Twice(conv=nn.Conv1d(2, 4, 3, bias=False), bn=nn.BatchNorm1d(4)), "not fused: a Conv1d: the fused block takes a 2-d"),
    (lambda: _Twice(pool=nn.MaxPool2d(3, 2)), "pool: a max-pool the fused block does not take"),
    (lambda: _Branch("conv"), "inner.conv: not fused: the convolution's output is used 2 times"),
    (lambda: _Branch("bn"), "inner.conv → inner.bn: not fused: the BatchNorm's output is used 2 times"),
    (lambda: _Moody(), "the model: its forward traces differently in training and evaluation mode"),
    (lambda: _Untraceable(), "the model: torch.fx cannot trace its forward"),
])
def test_explain_says_why_a_candidate_did_not_fuse(model, expected):
    lines = _explained(model())
    assert any(expected in line for line in lines), lines
    assert all("\n" not in line for line in lines)


def test_a_hook_makes_a_run_run_as_written_while_it_is_there():
    net = _Twice()
    seen = []
    handle = net.bn.register_forward_hook(lambda m, i, o: seen.append(o))
    assert "conv → bn → sn → pool: runs as written while bn has a forward hook" in _explained(net)
    x = torch.rand(3, 2, 2, 8, 8)
    net(x)
    assert len(seen) == 1  # the hook saw BatchNorm's output
    handle.remove()
    net(x)
    assert len(seen) == 1


def test_a_model_fx_cannot_trace_is_fused_in_its_sequential_containers():
    torch.manual_seed(0)
    written = _Untraceable()
    net = plif.fuse(copy.deepcopy(written))
    assert plif.fused_blocks(net) == [("body.0", "body.1", "body.2")]
    assert type(net) is _Untraceable and isinstance(net.body, FusedSequential)
    x = torch.rand(3, 2, 2, 6, 6)
    out, ref = net(x), written(x)
    assert torch.equal(out, ref) and out.sum() > 0
    out.sum().backward()
    ref.sum().backward()
    for p, q in zip(net.parameters(), written.parameters()):
        assert (p.grad - q.grad).abs().max() <= 1e-4 * q.grad.abs().max().clamp_min(1e-12)


def test_an_evaluation_mode_model_is_told_and_runs_as_written():
    written = _resnet().eval()
    fused, lines = plif.fuse(copy.deepcopy(written), explain=True)
    assert lines[-1].startswith("the model is in evaluation mode")
    x = _input("residual")
    assert torch.equal(fused(x), written(x))


def test_a_replaced_layer_is_the_one_that_runs():
    net = plif.fuse(_resnet())
    net.layer1[0].bn1 = TimeFolded(nn.SyncBatchNorm(8))  # as convert_sync_batchnorm replaces it
    assert ("layer1.0.conv1", "layer1.0.bn1", "layer1.0.sn1") not in plif.fused_blocks(net)
    assert len(plif.fused_blocks(net)) == 6


def test_copies_and_pickles_stay_fused_and_separate():
    net = plif.fuse(_resnet())
    x = _input("residual")
    out = net(x)
    buf = io.BytesIO()
    torch.save(net, buf)
    buf.seek(0)
    for other in (copy.deepcopy(net), pickle.loads(pickle.dumps(net)), torch.load(buf, weights_only=False)):
        assert plif.fused_blocks(other) == plif.fused_blocks(net) and other.conv1.layer.weight is not net.conv1.layer.weight
        torch.testing.assert_close(other(x), out)
        other(x).sum().backward()
        assert net.conv1.layer.weight.grad is None and other.conv1.layer.weight.grad is not None


def test_none_gives_the_model_back_as_written():
    net = plif.fuse(_resnet())
    assert plif.fuse(net, "none") is net and type(net) is nets.ResNet and plif.fused_blocks(net) == []
    assert not any(k.startswith("_plif") for k in net.__dict__)
    seq = plif.fuse(plif.fuse(_Untraceable()), "none")
    assert type(seq.body) is nn.Sequential


def test_memory_takes_the_names_plif_train_takes():
    assert tuple(MEMORY_PRESETS) == MEMORY_CHOICES
    for name in MEMORY_PRESETS:
        plif.fuse(_paper(), name)
    with pytest.raises(ValueError, match="unknown memory mode 'fast'; valid: fused, none"):
        plif.fuse(_paper(), "fast")
    with pytest.raises(TypeError, match="takes an nn.Module"):
        plif.fuse("model")
    assert FusedSequential  # the class an untraceable nn.Sequential becomes
