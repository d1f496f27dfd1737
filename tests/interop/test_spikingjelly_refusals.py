"""What plif.from_spikingjelly refuses, one line naming the module path and the attribute; and that
the SpikingJelly model is left as it was, with copies or (share=True) the same tensors."""
from __future__ import annotations

import pytest
import torch

from sj_testing import sj

from plif.interop import ConversionError, from_spikingjelly


def _net(s, neuron=None, **kw):
    neuron = neuron or s.neuron.ParametricLIFNode(**kw)
    net = torch.nn.Sequential(s.layer.Conv2d(2, 4, 3, padding=1, bias=False), s.layer.BatchNorm2d(4),
                              torch.nn.Sequential(neuron), s.layer.Flatten(), s.layer.Linear(4 * 16, 3))
    s.functional.set_step_mode(net, "m")
    return net


def _refused(net, match, **kw):
    with pytest.raises(ConversionError, match=match) as e:
        from_spikingjelly(net, **kw)
    assert "\n" not in str(e.value)


def test_single_step_mode():
    s = sj()
    net = _net(s)
    s.functional.set_step_mode(net, "s")
    _refused(net, r"^0: step_mode is 's' \(single-step\).*set_step_mode\(model, 'm'\)")


def test_unknown_neuron_named_by_path():
    s = sj()
    _refused(_net(s, s.neuron.QIFNode(step_mode="m")), r"^2\.0: QIFNode has no plif counterpart$")


def test_subclass_is_not_its_parent():
    s = sj()

    class MyLIF(s.neuron.LIFNode):
        pass

    _refused(_net(s, MyLIF(step_mode="m")), r"^2\.0: MyLIF has no plif counterpart")


@pytest.mark.parametrize("kw,match", [
    (dict(decay_input=False), r"^2\.0: decay_input False .*no plif counterpart"),
    (dict(store_v_seq=True), r"^2\.0: store_v_seq True"),
    (dict(v_reset=1.0, v_threshold=0.5), r"^2\.0: ParametricLIFNode v_reset \(1.0\) must be below v_threshold"),
])
def test_neuron_settings_refused(kw, match):
    s = sj()
    _refused(_net(s, s.neuron.ParametricLIFNode(step_mode="m", **kw)), match)


def test_surrogate_without_counterpart():
    s = sj()
    sn = s.neuron.LIFNode(surrogate_function=s.surrogate.Erf(), step_mode="m")
    _refused(_net(s, sn), r"^2\.0: surrogate_function Erf has no plif counterpart \(plif has ATan, Sigmoid")
    sn = s.neuron.LIFNode(surrogate_function=s.surrogate.ATan(spiking=False), step_mode="m")
    _refused(_net(s, sn), r"^2\.0: surrogate_function ATan\(spiking=False\)")


def test_cupy_and_triton_only_settings():
    s = sj()
    sn = s.neuron.IFNode(step_mode="m")
    sn.backend = "cupy"
    _refused(_net(s, sn), r"^2\.0: backend 'cupy' is a CuPy-only setting")
    sn = s.neuron.IFNode(step_mode="m")
    sn._neuron_precision = (torch.float16, "fp16", "fp32")
    _refused(_net(s, sn), r"^2\.0: _neuron_precision a Triton-only")


def test_layer_without_counterpart():
    s = sj()
    net = _net(s)
    net[3] = s.layer.Dropout2d(0.2, step_mode="m")
    _refused(net, r"^3: Dropout2d has no plif counterpart$")
    net = _net(s)
    net[0] = s.layer.SeqToANNContainer(torch.nn.Conv2d(2, 4, 3, padding=1), torch.nn.GELU())
    _refused(net, r"^0\.1: GELU has no plif counterpart$")


def test_state_dict_mismatch():
    s = sj()
    net = _net(s)
    sd = net.state_dict()
    sd["9.weight"] = sd.pop("4.weight")
    _refused(net, r"^state dict does not match the SpikingJelly model: missing 4\.weight; unexpected 9\.weight$",
             state_dict=sd)
    sd = net.state_dict()
    sd["0.weight"] = torch.zeros(4, 2, 1, 1)
    _refused(net, r"shape 0\.weight \[4, 2, 1, 1\] != \[4, 2, 3, 3\]$", state_dict=sd)


def test_state_dict_loaded_and_model_untouched():
    s = sj()
    net, other = _net(s), _net(s)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    out = from_spikingjelly(net, state_dict=other.state_dict())
    for k, v in net.state_dict().items():
        assert torch.equal(v, before[k]), k  # the SpikingJelly model kept its own weights
    assert torch.equal(out[0].layer.weight, other[0].weight)
    assert out[0].layer.weight is not other[0].weight
    assert isinstance(net[0], s.layer.Conv2d) and isinstance(net[2][0], s.neuron.ParametricLIFNode)


def test_share_holds_the_same_tensors():
    s = sj()
    net = _net(s)
    out = from_spikingjelly(net, share=True)
    assert out[0].layer.weight is net[0].weight
    assert out[2][0].w is net[2][0].w
    assert out[1].layer.running_mean is net[1].running_mean
    assert {id(p) for p in out.parameters()} == {id(p) for p in net.parameters()}


def test_a_neuron_called_twice_is_refused_by_name():
    """SpikingJelly carries a neuron's potential from its first call of a forward into the second; plif's
    neuron starts each call from rest (the outputs differed): refused in one line naming the module."""
    s = sj()

    class Twice(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = s.layer.Conv2d(2, 4, 3, padding=1, bias=False)
            self.conv2 = s.layer.Conv2d(4, 4, 3, padding=1, bias=False)
            self.sn = s.neuron.IFNode(step_mode="m")

        def forward(self, x):
            return self.sn(self.conv2(self.sn(self.conv1(x))))

    net = Twice()
    s.functional.set_step_mode(net, "m")
    _refused(net, r"^sn: is called 2 times in one forward \(traced\).*plif starts each call from rest")
    shared = s.neuron.IFNode(step_mode="m")
    seq = torch.nn.Sequential(s.layer.Conv2d(2, 4, 3, bias=False), shared, s.layer.Conv2d(4, 4, 3, bias=False), shared)
    s.functional.set_step_mode(seq, "m")
    _refused(seq, r"^1: is called 2 times in one forward \(at 1, 3\)")
    from_spikingjelly(_net(s))  # one call each: converted
