"""Issue 54: one planner (``plif.models.plan.LayerPlan``) for a notation network and for any module
``plif.fuse`` runs, and one rule for "the same input at every step" (``plif.layers.repeated``)."""
import copy

import torch
from torch import nn

import plif
from plif.layers.repeated import repeat_over_time, repeated_input

SPEC = "c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF"
THRESHOLD = 0.2


def test_the_same_input_at_every_step_is_a_stride_0_view_over_more_than_one_step():
    x = torch.rand(3, 2, 5)
    assert repeated_input(repeat_over_time(x, 4)) is x  # the tensor itself: its gradient comes once
    sliced = repeat_over_time(x, 4)[:, 1:]  # still repeated, not the view of a whole tensor
    assert torch.equal(repeated_input(sliced), x[1:])
    assert repeated_input(repeat_over_time(x, 4).contiguous()) is None  # equal values are not the rule
    assert repeated_input(repeat_over_time(x, 1)) is x  # one step: still a static input (its conv runs once)
    assert repeated_input(torch.rand(1, 3, 2, 5)) is None and repeated_input(torch.rand(5)) is None


def _pair():
    """A notation network and the same layers as a hand-written ``nn.Sequential``, fused."""
    torch.manual_seed(0)
    net = plif.build_network(SPEC, (1, 8, 8), 3, v_threshold=THRESHOLD)
    seq = plif.fuse(nn.Sequential(*copy.deepcopy(list(net.layers))))
    return net, seq


def test_a_notation_network_and_its_layers_fused_run_one_plan_bit_for_bit():
    net, seq = _pair()
    (run,) = seq._plif_runs  # the traced Sequential's one chain
    plan = [(a, b, type(s).__name__) for a, b, s in net.plan()]
    assert plan == [(a, b, type(s).__name__) for a, b, s in run.plan([seq.get_submodule(n) for n in run.names])]
    assert type(run) is type(net._plif_runs[0])
    assert plif.fused_blocks(net) == [("layers.0", "layers.1", "layers.2", "layers.3")]
    assert plif.fused_blocks(seq) == [("0", "1", "2", "3")]
    x = torch.rand(2, 1, 8, 8, requires_grad=True)
    out = net(x)  # a static input [B, ...]: its convolution runs once
    ref = seq(repeat_over_time(x, 3))
    assert torch.equal(out, ref) and out.sum() > 0
    out.sum().backward()
    grads = [p.grad.clone() for p in net.parameters()]
    ref.sum().backward()
    assert all(torch.equal(g, p.grad) for g, p in zip(grads, seq.parameters()))


def test_frames_repeated_by_the_caller_run_as_the_static_input_does():
    """``[T, B, ...]`` frames that repeat one image (stride 0) go through the first convolution once,
    as ``[B, ...]`` does: one rule, not a shape test in one place and a stride test in another."""
    net, _ = _pair()
    seen = []
    conv = net.layers[0].layer
    forward = conv.forward
    conv.forward = lambda x: seen.append(tuple(x.shape)) or forward(x)
    x = torch.rand(2, 1, 8, 8)
    a, b = net(x), net(repeat_over_time(x, 3))
    assert seen == [(2, 1, 8, 8), (2, 1, 8, 8)] and torch.equal(a, b)


def test_a_hooked_notation_network_runs_its_layers_as_written_and_still_hoists():
    """A hook on any layer makes the layers run as written, in a notation network as in a fused
    module (a hook sees what the module computes); a static input still goes through the first
    convolution once unless that convolution's wrapper is hooked."""
    net, _ = _pair()
    seen = []
    net.layers[3].register_forward_hook(lambda m, i, o: seen.append(i[0].dtype))  # the pool after the block
    conv_inputs = []
    net.layers[0].layer.register_forward_pre_hook(lambda m, i: conv_inputs.append(tuple(i[0].shape)))
    out = net(torch.rand(2, 1, 8, 8))
    assert seen == [torch.float32] and conv_inputs == [(2, 1, 8, 8)]  # the pool ran as written, the conv once
    net.layers[0].register_forward_hook(lambda m, i, o: None)
    net(torch.rand(2, 1, 8, 8))
    assert conv_inputs[-1] == (6, 1, 8, 8) and out.shape == (3, 2, 10)  # T*B: the wrapper's hook sees [T, B, ...]


def test_a_notation_network_pickles_and_its_copy_makes_its_own_plan():
    """Its plan is the planner's, which a copy makes again from its own layers (at 611aecf the plan's
    closures made ``torch.save(net)`` fail)."""
    import io

    net, _ = _pair()
    x = torch.rand(2, 1, 8, 8)
    buf = io.BytesIO()
    torch.save(net, buf)
    buf.seek(0)
    again = torch.load(buf, weights_only=False)
    assert torch.equal(again(x), net(x))
    assert again.plan()[0][2] is not net.plan()[0][2] and plif.fused_blocks(again) == plif.fused_blocks(net)
