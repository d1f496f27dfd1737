"""plif.step: any module run frame by frame with carried state (issue 54.2), equal to its whole-T forward in
eval mode; what needs every step at once refused in one line."""
import pytest
import torch
from torch import nn

import plif
from plif.layers import PerStepBatchNorm, TimeFolded, TimeInvariantDropout
from plif.models import ModuleState, build_network
from plif.models.residual import sew_resnet18, spiking_resnet18


class Residual(nn.Module):
    def __init__(self, c=4, classes=5, bn=True):
        super().__init__()
        norm = (lambda: TimeFolded(nn.BatchNorm2d(c))) if bn else (lambda: nn.Identity())
        self.stem, self.stem_bn, self.stem_sn = TimeFolded(nn.Conv2d(1, c, 3, padding=1, bias=False)), norm(), plif.PLIF()
        self.pool = TimeFolded(nn.MaxPool2d(2))
        self.conv1, self.bn1, self.sn1 = TimeFolded(nn.Conv2d(c, c, 3, padding=1, bias=False)), norm(), plif.LIF()
        self.drop = TimeInvariantDropout(0.5)
        self.fc = TimeFolded(nn.Linear(c * 4 * 4, classes))
        self.sn2 = plif.IF()

    def forward(self, x):
        s = self.pool(self.stem_sn(self.stem_bn(self.stem(x))))
        s = self.sn1(self.bn1(self.conv1(s)) + s)       # the shortcut before the neuron
        return self.sn2(self.fc(self.drop(s).flatten(2)))


def _stepped(model, x, state=None):
    outs = []
    for t in range(x.shape[0]):
        o, state = plif.step(model, x[t], state)
        outs.append(o)
    return torch.stack(outs), state


@pytest.mark.parametrize("make", [lambda: Residual(), lambda: sew_resnet18((1, 8, 8), 5, 3, width=4),
                                  lambda: spiking_resnet18((1, 8, 8), 5, 3, width=4)],
                         ids=["by-hand", "sew-resnet18-fused", "spiking-resnet18"])
def test_stepping_equals_the_whole_forward_in_eval(make):
    torch.manual_seed(0)
    net = make().double().eval()
    x = torch.rand(3, 2, 1, 8, 8, dtype=torch.float64) * 4
    with torch.no_grad():
        want = net(x)
        got, state = _stepped(net, x)
    assert torch.equal(got, want) and state.t == 3
    assert set(state.potentials) == {n for n, m in net.named_modules() if isinstance(m, plif.neurons.SpikingNeuron)}


def test_the_state_carries_on_past_T_and_is_not_changed():
    torch.manual_seed(0)
    net = Residual().eval()
    x = torch.rand(6, 2, 1, 8, 8) * 4
    _, s3 = _stepped(net, x[:3])
    before = {k: v.clone() for k, v in s3.potentials.items()}
    got, _ = _stepped(net, x[3:], s3)
    assert torch.equal(got, net(x)[3:])
    assert all(torch.equal(before[k], s3.potentials[k]) for k in before)


def test_training_dropout_draws_its_mask_once_and_per_step_bn_steps():
    torch.manual_seed(0)
    net = Residual(bn=False).train()
    x = torch.rand(3, 2, 1, 8, 8) * 4
    torch.manual_seed(1)
    want = net(x)
    torch.manual_seed(1)
    got, state = _stepped(net, x)
    assert set(state.masks) == {"drop"} and torch.equal(got, want)
    per_step = nn.Sequential(TimeFolded(nn.Conv2d(1, 2, 3, bias=False)), PerStepBatchNorm(nn.BatchNorm2d(2)), plif.PLIF())
    assert plif.step(per_step, x[0])[0].shape == (2, 2, 6, 6)


def test_a_notation_network_steps_through_its_own_step():
    net = build_network("c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF", (1, 8, 8), 3).eval()
    out, state = plif.step(net, torch.rand(2, 1, 8, 8))
    assert out.shape == (2, 10) and type(state).__name__ == "NetworkState"


@pytest.mark.parametrize("case,error", [
    ("bn-training", "stem_bn.layer \\(BatchNorm2d\\) normalises over all T\\*B inputs of a batch in training"),
    ("neuron-twice", "neuron sn is called more than once per forward"),
    ("fused-training", "the model is fused and in training mode"),
    ("reduces-over-time", "the model's output for one step is \\[2, 5\\], not \\[1, B=2, ...\\]"),
    ("not-a-module", "plif.step takes an nn.Module, got function"),
    ("numpy-frame", "x_t must be a torch.Tensor \\[B, ...\\] \\(one time-step\\), got ndarray"),
    ("state-a-dict", "state must be the ModuleState a previous plif.step returned"),
    ("state-t-negative", "state.t must be the number of steps taken \\(an integer >= 0\\), got -1"),
])
def test_what_needs_every_step_at_once_is_refused_in_one_line(case, error):
    import numpy as np

    x, model, state = torch.rand(2, 1, 8, 8), Residual().eval(), None
    if case == "bn-training":
        model = Residual().train()
    elif case == "neuron-twice":
        class Twice(nn.Module):
            def __init__(self):
                super().__init__()
                self.sn = plif.PLIF()

            def forward(self, x):
                return self.sn(self.sn(x))
        model = Twice()
    elif case == "fused-training":
        model = nn.Sequential(TimeFolded(nn.Conv2d(1, 4, 3, bias=False)), TimeFolded(nn.BatchNorm2d(4)), plif.PLIF())
        model = plif.fuse(model).train()
        for m in model.modules():  # a BN that normalises per step, so the fused model is the only reason
            if isinstance(m, nn.BatchNorm2d):
                m.eval()
    elif case == "reduces-over-time":
        class Mean(Residual):
            def forward(self, x):
                return super().forward(x).mean(0)
        model = Mean().eval()
    elif case == "not-a-module":
        model = lambda x: x  # noqa: E731
    elif case == "numpy-frame":
        x = np.zeros((2, 1, 8, 8), dtype=np.float32)
    elif case == "state-a-dict":
        state = {}
    elif case == "state-t-negative":
        state = ModuleState(t=-1)
    with pytest.raises((TypeError, ValueError), match=error):
        plif.step(model, x, state)


def test_state_detach_cuts_the_graph():
    net = Residual().eval()
    x = torch.rand(2, 1, 8, 8, requires_grad=True) * 4
    _, s = plif.step(net, x)
    assert isinstance(s, ModuleState) and all(not v.requires_grad for v in s.detach().potentials.values())


def test_a_converted_spikingjelly_model_steps_as_its_forward():
    from sj_testing import sj

    from plif.interop import from_spikingjelly

    s = sj()
    torch.manual_seed(0)
    model = s.sew_resnet.sew_resnet18(cnf="ADD", num_classes=10, spiking_neuron=s.neuron.ParametricLIFNode,
                                      surrogate_function=s.surrogate.ATan(), detach_reset=True)
    s.functional.set_step_mode(model, "m")
    net = from_spikingjelly(model.double()).eval()
    x = torch.rand(3, 1, 3, 16, 16, dtype=torch.float64) * 3
    with torch.no_grad():
        want = net(x)
        got, _ = _stepped(net, x)
    assert torch.equal(got, want)
