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
    """Every name ``plif train --memory`` takes, each training a step: the spikes of the model as
    written (bf16 potentials aside), a gradient for every parameter."""
    assert tuple(MEMORY_PRESETS) == MEMORY_CHOICES
    torch.manual_seed(0)
    written = nn.Sequential(_Twice(neuron=plif.PLIF(v_threshold=THRESHOLD)), *nets.conv_bn(4, 4),
                            plif.PLIF(v_threshold=THRESHOLD))
    x = (torch.rand(3, 2, 2, 8, 8, generator=torch.Generator().manual_seed(1)) > 0.5).float()
    ref = written(x)
    assert ref.sum() > 0
    for name, opts in MEMORY_PRESETS.items():
        net = plif.fuse(copy.deepcopy(written), name)
        assert bool(plif.fused_blocks(net)) == opts.fused_block, name
        out = net(x)
        assert opts.h_bf16 or torch.equal(out, ref), name
        out.sum().backward()
        assert all(p.grad is not None for p in net.parameters()), name
    with pytest.raises(ValueError, match="unknown memory mode 'fast'; valid: fused, none"):
        plif.fuse(_paper(), "fast")
    with pytest.raises(TypeError, match="takes a torch.nn.Module"):
        plif.fuse("model")
    assert FusedSequential  # the class an untraceable nn.Sequential becomes


def test_a_notation_network_inside_takes_the_memory_mode_and_names_its_runs():
    net = plif.build_network("c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF", (1, 8, 8), 2)
    model = nn.Sequential(net)
    assert plif.fused_blocks(plif.fuse(model)) == [("0.layers.0", "0.layers.1", "0.layers.2", "0.layers.3")]
    assert net.memory == MEMORY_PRESETS["fused"]
    assert plif.fused_blocks(plif.fuse(model, "none")) == [] and net.memory == MEMORY_PRESETS["none"]


def _scale(grads):
    return tuple(None if g is None else g * 3 for g in grads)


BACKWARD_HOOKS = {
    "full-bn": lambda net: net.bn.register_full_backward_hook(lambda m, gi, go: _scale(gi)),
    "full-neuron": lambda net: net.sn.register_full_backward_hook(lambda m, gi, go: _scale(gi)),
    "full-inner-bn": lambda net: net.bn.layer.register_full_backward_hook(lambda m, gi, go: _scale(gi)),
    "pre-neuron": lambda net: net.sn.register_full_backward_pre_hook(lambda m, go: _scale(go)),
    "pre-conv": lambda net: net.conv.register_full_backward_pre_hook(lambda m, go: _scale(go)),
    "old-bn": lambda net: net.bn.register_backward_hook(lambda m, gi, go: _scale(gi)),
    "tensor-weight": lambda net: net.conv.layer.weight.register_hook(lambda g: g * 3),
}


@pytest.mark.filterwarnings("ignore:.*non-full backward hook", "ignore:Full backward hook is firing")
@pytest.mark.parametrize("memory", ["fused", "exact"])
@pytest.mark.parametrize("hook", list(BACKWARD_HOOKS))
def test_a_backward_hook_scales_the_gradient_fused_as_written(hook, memory):
    """A hook that triples a gradient on the BatchNorm, the neuron or the conv of a fused run triples the
    conv's weight gradient fused as it does as written (fused, the block's backward never called the
    modules' hooks), and explain says the run runs as written."""
    torch.manual_seed(0)
    plain = _Twice()
    x = torch.rand(3, 2, 2, 8, 8, generator=torch.Generator().manual_seed(1))

    def grad(net):
        net.zero_grad()
        net(x).mul(torch.linspace(0, 1, 3 * 2 * 4 * 4 * 4).view(3, 2, 4, 4, 4)).sum().backward()
        return net.conv.layer.weight.grad.clone()

    before = grad(copy.deepcopy(plain))
    written, fused = copy.deepcopy(plain), plif.fuse(copy.deepcopy(plain), memory)
    BACKWARD_HOOKS[hook](written)
    handle = BACKWARD_HOOKS[hook](fused)
    g0, g1 = grad(written), grad(fused)
    assert not torch.allclose(g0, before, rtol=0.1)
    assert (g1 - g0).abs().max() <= 1e-4 * g0.abs().max()
    if hook != "tensor-weight":  # a parameter's hook runs fused too: the run stays fused
        assert any("runs as written while" in line and "has a backward hook" in line
                   for line in _explained(copy.deepcopy(fused), memory)), hook
    handle.remove()
    torch.testing.assert_close(grad(fused), before, rtol=1e-4, atol=1e-6)


def test_a_backward_hook_on_a_notation_networks_block_fires():
    """The fused block of a notation network (FusedBlock's own fallback) runs its layers as written
    while one has a backward hook, so the hook fires and scales the gradient as it does without fusion."""
    torch.manual_seed(0)
    net = plif.build_network("c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF", (2, 8, 8), 3, v_threshold=THRESHOLD)
    written = copy.deepcopy(net).set_memory(MEMORY_PRESETS["none"])
    x = torch.rand(3, 2, 2, 8, 8, generator=torch.Generator().manual_seed(2))
    grads, calls = [], []
    for m in (net, written):
        m.layers[1].register_full_backward_hook(lambda mod, gi, go: calls.append(1) or _scale(gi))
        m(x).square().sum().backward()
        grads.append(m.layers[0].layer.weight.grad)
    assert len(calls) == 2
    assert (grads[0] - grads[1]).abs().max() <= 1e-4 * grads[1].abs().max()


@pytest.mark.parametrize("traced", [True, False], ids=["traced", "untraceable"])
def test_a_slice_of_a_fused_sequential_computes_the_slice_as_written(traced):
    """``fused[:3]`` raised AttributeError ('Sequential' object has no attribute '3': the traced forward
    called children the slice lacks; a FusedSequential slice had no plan)."""
    torch.manual_seed(0)
    tail = [] if traced else [_Gate()]
    written = nn.Sequential(*nets.conv_bn(2, 4), plif.PLIF(v_threshold=THRESHOLD), TimeFolded(nn.MaxPool2d(2)), *tail)
    fused = plif.fuse(copy.deepcopy(written))
    assert isinstance(fused, FusedSequential) != traced
    x = torch.rand(3, 2, 2, 8, 8)
    for idx in (slice(None, 3), slice(1, None), slice(0, 4), slice(None, None, 2)):
        part = fused[idx]
        assert type(part) is nn.Sequential and list(part) == list(fused)[idx]
        y = x if idx.start is None or idx.start == 0 else fused[0](x)
        torch.testing.assert_close(part(y), written[idx](y))
    assert fused[2] is list(fused)[2] and torch.equal(fused(x), written(x))


@pytest.mark.parametrize("bad", [None, 3, "x", torch.zeros(2), [nn.Linear(2, 2)]], ids=repr)
def test_fuse_and_fused_blocks_refuse_what_is_not_a_module_in_one_line(bad):
    for call, says in ((plif.fuse, r"^plif\.fuse\(model\): model takes a torch\.nn\.Module, got "),
                       (plif.fused_blocks, r"^plif\.fused_blocks\(model\): model takes a torch\.nn\.Module")):
        with pytest.raises(TypeError, match=says) as e:
            call(bad)
        assert "\n" not in str(e.value)
