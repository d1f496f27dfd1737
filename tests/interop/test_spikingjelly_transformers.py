"""plif.from_spikingjelly takes SpikingJelly 2.0's spiking transformers exactly: Spikformer, QKFormer (token
and channel attention), the Spike-driven Transformer and MaxFormer (ImageNet and CIFAR forms), each in the
smallest configuration its code allows (embedding 32-64, one block a stage, 16x16 or 32x32 images, T=3,
B=2), float64, in training mode and in evaluation mode (running statistics taken from a batch first): the
outputs and every parameter's gradient within 1e-9 of SpikingJelly's, relative to each tensor's largest
value.  BatchNorm's affine parameters are drawn so that every attention neuron fires (checked: a silent
attention would leave its products of spikes untested in the forward pass).

One exception, measured and bounded: the bias of a convolution that feeds a BatchNorm in training mode has
gradient zero in exact arithmetic (the normalisation removes any constant), and both libraries give
rounding noise there (~1e-15, summed by BatchNorm's backward in a different order); those gradients are
checked to be zero to 1e-12 of the model's largest gradient instead.
"""
from __future__ import annotations

import pytest
import torch

from sj_testing import sj

import plif
from plif.bench.residual_twin import sj_key
from plif.interop import from_spikingjelly
from plif.layers import QKAttention, SpikeDrivenSelfAttention, SpikingSelfAttention


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    scale = max(float(a.abs().max()), float(b.abs().max()), 1e-300)
    return float((a - b).abs().max()) / scale


def _zero_by_bn(net, name: str) -> bool:
    """``name`` is the bias of a convolution (time-folded): where it feeds a BatchNorm, its gradient is 0."""
    module = net.get_submodule(name.rpartition(".")[0])
    return name.endswith(".bias") and isinstance(module, (torch.nn.Conv1d, torch.nn.Conv2d))


def _sj_transformer(name: str):
    from plif.bench.spikingjelly import spikingjelly_model

    return spikingjelly_model(name)


def _firing(model):
    """BatchNorm's scale and shift drawn from U(0.5, 1.5): the attention's inputs fire often enough for its
    products of spikes to reach the threshold (with SpikingJelly's initial 1 and 0 they stay silent)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(0.5, 1.5)
    return model


def _calibrate(s, model, x):
    """Running statistics of one training batch (momentum 1), so the evaluation-mode network fires."""
    saved = {m: m.momentum for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)}
    for m in saved:
        m.momentum = 1.0
    with torch.no_grad():
        model.train()(x)
    s.functional.reset_net(model)
    for m, momentum in saved.items():
        m.momentum = momentum


def check_transformer(s, model, x, mode: str, tol: float = 1e-9) -> dict:
    """Convert ``model`` (float64) and compare outputs and gradients in ``mode``; the largest differences."""
    model = model.double()
    if mode == "eval":
        _calibrate(s, model, x)
        model.eval()
    net = from_spikingjelly(model)
    torch.manual_seed(1)
    out_sj = model(x)
    assert out_sj.abs().max() > 0, "nothing reached the output: the comparison would be vacuous"
    r = torch.randn_like(out_sj)
    (out_sj * r).sum().backward()
    s.functional.reset_net(model)
    rates = {}
    for name, m in net.named_modules():
        if name.endswith("attn_lif"):
            m.register_forward_hook(lambda _m, _i, o, name=name: rates.__setitem__(name, float(o.detach().mean())))
    out = net(x)
    assert rates and all(r > 0 for r in rates.values()), f"an attention that does not fire: {rates}"
    (out * r).sum().backward()
    worst = {"output": _rel(out.detach(), out_sj.detach()), "gradient": 0.0}
    assert worst["output"] <= tol, f"outputs differ: {worst['output']:.3g}"
    sj_params = dict(model.named_parameters())
    ours = dict(net.named_parameters())
    assert sorted(map(sj_key, ours)) == sorted(sj_params), "not the same parameters"
    largest = max(float(p.grad.abs().max()) for p in sj_params.values() if p.grad is not None)
    for name, p in ours.items():
        q = sj_params[sj_key(name)]
        assert p.grad is not None and q.grad is not None, name
        if mode == "train" and _zero_by_bn(net, name):
            assert max(float(p.grad.abs().max()), float(q.grad.abs().max())) <= 1e-12 * largest, name
            continue
        worst["gradient"] = max(worst["gradient"], _rel(p.grad, q.grad))
        assert _rel(p.grad, q.grad) <= tol, f"gradient of {name}: {_rel(p.grad, q.grad):.3g}"
    return worst


def _image(B=2, T=3, side=16):
    torch.manual_seed(0)
    return torch.rand(T, B, 3, side, side, dtype=torch.float64) * 3


MODELS = {
    "spikformer": lambda m: m.Spikformer(T=3, img_size_h=16, img_size_w=16, patch_size=4, num_classes=10,
                                         embed_dims=32, num_heads=2, depths=1),
    "qkformer-token": lambda m: m.QKFormer(T=3, num_classes=10, embed_dims=32, num_heads=(1, 2, 2), depths=(1, 1, 1)),
    "qkformer-channel": lambda m: m.QKFormer(T=3, num_classes=10, embed_dims=32, num_heads=(1, 2, 2),
                                             depths=(1, 1, 1), qka_type="channel"),
    "spike-driven": lambda m: m.SpikeDrivenTransformer(T=3, num_classes=10, embed_dims=32, num_heads=2, depths=1,
                                                       pooling_stat="1100"),
    "maxformer": lambda m: m.MaxFormer(T=3, num_classes=10, embed_dims=32, depths=(1, 1, 1)),
    "maxformer-cifar": lambda m: m.MaxFormer(T=3, num_classes=10, embed_dims=64, depths=(1, 1, 1), cifar=True),
}
MODULE = {"spikformer": "spikformer", "qkformer-token": "qkformer", "qkformer-channel": "qkformer",
          "spike-driven": "spike_driven_transformer", "maxformer": "maxformer", "maxformer-cifar": "maxformer"}
SIDE = {"qkformer-token": 32, "qkformer-channel": 32, "maxformer": 32}
"""Images of 32x32 where 16x16 would leave the last stage one token (its self-attention a product of scalars)."""


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("name", list(MODELS))
def test_transformer_converts_exactly(name, mode):
    s = sj()
    torch.manual_seed(0)
    model = _firing(MODELS[name](_sj_transformer(MODULE[name])))
    worst = check_transformer(s, model, _image(side=SIDE.get(name, 16)), mode)
    assert worst["output"] <= 1e-9 and worst["gradient"] <= 1e-9


def test_attention_layers_become_plifs():
    """Each SpikingJelly attention layer is plif's, holding the converted layers under SpikingJelly's names."""
    s = sj()
    kinds = {"spikformer": SpikingSelfAttention, "qkformer-channel": QKAttention,
             "spike-driven": SpikeDrivenSelfAttention}
    for name, kind in kinds.items():
        torch.manual_seed(0)
        net = from_spikingjelly(MODELS[name](_sj_transformer(MODULE[name])), fuse=False)
        found = [m for m in net.modules() if type(m).__module__.startswith("spikingjelly.activation_based.layer")]
        assert not found, found
        assert any(isinstance(m, kind) for m in net.modules()), name
    attn = net.blocks[0].attn
    assert isinstance(attn.q_conv, plif.layers.TimeFolded) and isinstance(attn.q_lif, plif.LIF)


def test_spikformer_with_plif_neurons():
    """Spikformer built with ParametricLIFNode and ATan (any neuron plif has): the same numbers, w's gradient too."""
    s = sj()
    torch.manual_seed(0)
    model = _sj_transformer("spikformer").Spikformer(
        T=3, img_size_h=16, img_size_w=16, patch_size=4, num_classes=10, embed_dims=32, num_heads=2, depths=1,
        spiking_neuron=s.neuron.ParametricLIFNode, surrogate_function=s.surrogate.ATan(), detach_reset=True)
    check_transformer(s, _firing(model), _image(), "train")


def _refused(model, match):
    from plif.interop import ConversionError

    with pytest.raises(ConversionError, match=match) as e:
        from_spikingjelly(model)
    assert "\n" not in str(e.value)


def test_attention_plif_cannot_compute_is_refused_by_path_and_a_subclass_kept():
    """Heads that do not divide the channels (SpikingJelly's own forward fails on them) and a submodule added to
    an attention layer (plif's forward would not call it) are refused; a subclass of one (its forward may
    differ) is not replaced: its own forward runs on the converted layers, as any container's."""
    s = sj()
    sf = _sj_transformer("spikformer")

    def small():
        torch.manual_seed(0)
        return MODELS["spikformer"](sf)

    model = small()
    model.blocks[0].attn.num_heads = 3
    _refused(model, r"^blocks\.0\.attn: SpikingSelfAttention num_heads must be a positive integer dividing dim 32, "
                    r"got 3$")
    model = small()
    model.blocks[0].attn.gate = s.layer.Linear(4, 4, step_mode="m")
    _refused(model, r"^blocks\.0\.attn: SpikingSelfAttention has the submodules .*'gate'.*, not SpikingJelly's")

    class MyAttention(s.layer.SpikingSelfAttention):
        pass

    model = small()
    mine = MyAttention(32, 2)
    s.functional.set_step_mode(mine, "m")
    model.blocks[0].attn = mine
    net = from_spikingjelly(model)  # a user's module: its own forward runs, as written, on plif's layers
    assert type(net.blocks[0].attn) is MyAttention and isinstance(net.blocks[0].attn.qkv_lif, plif.LIF)


def test_conv1d_and_batchnorm1d_over_time():
    """SpikingJelly's multi-step ``layer.Conv1d`` and ``layer.BatchNorm1d`` (on tokens [T, B, C, L] and on
    features [T, B, C]) are plif's time-folded torch layers: the same numbers, the same running statistics."""
    s = sj()
    L, N = s.layer, s.neuron
    torch.manual_seed(0)
    tokens = torch.nn.Sequential(L.Conv1d(4, 8, 3, padding=1), L.BatchNorm1d(8), N.LIFNode(), L.Conv1d(8, 6, 1),
                                 L.Flatten(), L.BatchNorm1d(6 * 5), N.IFNode(), L.Linear(30, 3))
    s.functional.set_step_mode(tokens, "m")
    net = from_spikingjelly(tokens.double(), fuse=False)
    assert isinstance(net[0], plif.layers.TimeFolded) and type(net[0].layer) is torch.nn.Conv1d
    assert type(net[5].layer) is torch.nn.BatchNorm1d
    x = torch.randn(3, 2, 4, 5, dtype=torch.float64) * 2
    want = tokens(x)
    got = net(x)
    assert want.abs().max() > 0
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    for a, b in zip(net.buffers(), tokens.buffers()):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
