import torch
from torch import nn

from plif.deploy.spike_inference import spike_fed_layers, to_spike_inference
from plif.deploy.spike_ops import GatherConv2d, GatherLinear
from plif.models import build_zoo


def test_spike_fed_layers_of_the_mnist_network():
    net = build_zoo("mnist")
    kinds = [type(net.layers[i]).__name__ if not hasattr(net.layers[i], "layer") else type(net.layers[i].layer).__name__
             for i in spike_fed_layers(net)]
    # the encoder conv (layer 0) sees the image; the second conv and both FCs see spikes
    assert 0 not in spike_fed_layers(net)
    assert kinds.count("Conv2d") == 1 and kinds.count("Linear") == 2


def test_layers_are_swapped_and_the_encoder_stays_dense(make_net):
    fast = to_spike_inference(make_net())
    swapped = [type(l.layer) for l in fast.layers if hasattr(l, "layer")]
    assert swapped.count(GatherConv2d) == 1 and swapped.count(GatherLinear) == 2
    assert isinstance(fast.layers[0].layer, nn.Conv2d)


def test_identical_outputs_in_float64(make_net):
    net = make_net(dtype=torch.float64).eval()
    x = torch.randn(16, 1, 16, 16, dtype=torch.float64)
    with torch.no_grad():
        want, got = net(x), to_spike_inference(net, max_density=1.0)(x)
    assert want.sum() > 0
    assert torch.equal(want, got)


def test_identical_predictions_in_float32_on_event_input(make_net):
    net = make_net().eval()
    x = (torch.rand(6, 32, 1, 16, 16) < 0.3).float() * 2  # event-count-like frames, non-binary
    with torch.no_grad():
        want, got = net(x), to_spike_inference(net, max_density=1.0)(x)
    assert torch.equal(want.mean(0).argmax(-1), got.mean(0).argmax(-1))
    assert (want != got).float().mean() < 1e-3


def test_the_swapped_spike_layers_are_the_ones_that_run(make_net, monkeypatch):
    calls = []
    for cls in (GatherConv2d, GatherLinear):
        real = cls.forward
        monkeypatch.setattr(cls, "forward", lambda self, *a, _real=real, **k: (calls.append(type(self)), _real(self, *a, **k))[1])
    fast = to_spike_inference(make_net().eval(), max_density=1.0)
    with torch.no_grad():
        fast(torch.randn(4, 1, 16, 16))
    assert calls.count(GatherConv2d) == 1 and calls.count(GatherLinear) == 2
