"""A network run one frame at a time with carried state equals its multi-step forward bit for bit,
on every zoo network (narrow, small frames), in eval mode and in training with per-step BatchNorm."""
import copy
import re

import pytest
import torch
from torch import nn

from plif.catalog import DATASETS
from plif.models import NetworkState, build_network
from plif_testing import narrow_zoo

T = 3


def _net(name, **kw):
    """The narrow zoo network, BatchNorm statistics calibrated on ``x`` and its linear layers scaled so
    that every spiking layer fires; ``x`` is a static image batch or event frames as the dataset's."""
    spec, shape = narrow_zoo(name)
    torch.manual_seed(0)
    net = build_network(spec, shape, T, v_threshold=0.5, **kw)
    g = torch.Generator().manual_seed(1)
    if not DATASETS[name].is_event:
        x = torch.rand(2, *shape, generator=g)
    else:
        x = (torch.rand(T, 2, *shape, generator=g) > 0.7).float()
    for m in net.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.momentum = None  # the running statistics become the batch's
        if isinstance(m, nn.Linear):
            m.weight.data *= 4
    with torch.no_grad():
        net.train()(x)
    return net, x


def _frames(net, x):
    return [x] * T if x.dim() == len(net.input_shape) + 1 else list(x)


def _stepped(net, x, state=None):
    outs = []
    for x_t in _frames(net, x):
        out, state = net.step(x_t, state)
        outs.append(out)
    return torch.stack(outs), state


def _spikes_per_layer(net, x):
    counts = []
    hooks = [m.register_forward_hook(lambda m, i, o: counts.append(float(o.sum()))) for m in net.neuron_layers()]
    try:
        out = net(x)
    finally:
        for h in hooks:
            h.remove()
    return out, counts


@pytest.mark.parametrize("name", list(DATASETS))
def test_stepping_equals_the_multi_step_forward_bit_for_bit(name):
    net, x = _net(name)
    net.eval()
    with torch.no_grad():
        out, counts = _spikes_per_layer(net, x)
        stepped, state = _stepped(net, x)
    assert all(c > 0 for c in counts), counts  # every spiking layer fires: the comparison means something
    assert torch.equal(stepped, out)
    assert state.t == T and len(state.potentials) == len(net.neuron_layers())


@pytest.mark.parametrize("name", ["fashion-mnist", "dvs128-gesture"])
def test_training_with_per_step_batchnorm_steps_exactly(name):
    """Dropout masks drawn at the first step (same generator, same layer order), BatchNorm per step:
    outputs and running statistics bit for bit, gradients through the carried state to rounding."""
    net, x = _net(name, bn_per_step=True)
    twin = copy.deepcopy(net)
    torch.manual_seed(5)
    out = net(x)
    torch.manual_seed(5)
    stepped, state = _stepped(twin, x)
    assert torch.equal(stepped, out) and out.sum() > 0
    assert all(m is not None for m in state.masks)
    for a, b in zip(net.buffers(), twin.buffers()):
        assert torch.equal(a, b)
    target = torch.rand(out.shape, generator=torch.Generator().manual_seed(3))
    ((out - target) ** 2).sum().backward()
    ((stepped - target) ** 2).sum().backward()
    for (n, a), b in zip(net.named_parameters(), twin.parameters()):
        assert torch.allclose(a.grad, b.grad, rtol=1e-4, atol=1e-6), n
    assert any(p.grad.abs().sum() > 0 for n, p in net.named_parameters() if n.endswith(".w"))


def test_a_stream_goes_on_past_T_and_the_state_is_not_changed_in_place():
    net, x = _net("nmnist")
    net.eval()
    with torch.no_grad():
        first, state = _stepped(net, x)
        before = [v.clone() for v in state.potentials]
        more, later = _stepped(net, x, state)
    assert later.t == 2 * T and all(torch.equal(a, b) for a, b in zip(state.potentials, before))
    assert torch.equal(torch.cat([first, more]), net(torch.cat([x, x])))  # 2T frames in one forward
    assert all(not v.requires_grad for v in state.detach().potentials)


def test_batch_statistics_shapes_and_batch_size_are_refused_in_one_line():
    net, x = _net("nmnist")
    net.train()
    with pytest.raises(ValueError, match=r"step\(\): layer 1 \(BatchNorm2d\) normalises over all T\*B inputs .* "
                                         "bn_per_step=True"):
        net.step(x[0])
    net.eval()
    with pytest.raises(ValueError, match=r"net.step\(x_t\): takes one frame x_t \[B, 2, 12, 12\], got \(3, 2, 2, 12, 12\)"):
        net.step(x)
    _, state = net.step(x[0])
    with pytest.raises(ValueError, match="the state is for a batch of 2, but x_t has 1 samples"):
        net.step(x[0, :1], state)
    assert isinstance(net.initial_state(), NetworkState) and net.initial_state().t == 0


def test_a_training_step_past_T_through_per_step_batchnorm_is_refused_in_one_line():
    """It was taken (issue 53): the running statistics updated more often than a training batch of T
    steps does.  In eval mode the stream goes on; a new batch starts at rest."""
    net, x = _net("fashion-mnist", bn_per_step=True)
    net.train()
    _, state = _stepped(net, x)
    with pytest.raises(ValueError, match=r"net.step\(\): step 4 is past T = 3 in training, through a per-step "
                                         r"BatchNorm \(layer 1\) .* net.initial_state\(\), or step in eval mode"):
        net.step(x, state)
    net.step(x)  # the next batch
    net.eval()
    with torch.no_grad():
        assert net.step(x, state)[1].t == T + 1


@pytest.mark.parametrize("t", [-1, 1.5, True, "0"])
def test_a_hand_made_state_with_a_bad_t_is_refused_in_one_line(t):
    net, x = _net("nmnist")
    net.eval()
    _, state = net.step(x[0])
    bad = NetworkState(t, state.potentials, state.masks)
    with pytest.raises(ValueError, match=rf"net.step\(x_t, state\): the state's t \(steps taken, 0 or more\) is "
                                         rf"{re.escape(repr(t))}; start with net.initial_state\(\)"):
        net.step(x[1], bad)


@pytest.mark.parametrize("args, kind, says", [
    (("bogus",), ValueError, r"NetworkState.to\('bogus'\): takes what Tensor.to takes \(a device such as 'cpu'"),
    (("cuda:x",), ValueError, r"NetworkState.to\('cuda:x'\): takes what Tensor.to takes"),
    (("cpu", "float64"), TypeError, r"NetworkState.to\('cpu', 'float64'\): takes what Tensor.to takes"),
])
def test_state_to_refuses_what_tensor_to_refuses_in_one_line(args, kind, says):
    """Issue 53: a raw torch error before; refused even before the first step (no potential to move yet)."""
    state = NetworkState(0, (None,), ())
    for s in (state, NetworkState(1, (torch.zeros(2, 3),), ())):
        with pytest.raises(kind, match=says) as e:
            s.to(*args)
        assert "\n" not in str(e.value)
    assert state.to(torch.float64) == state
