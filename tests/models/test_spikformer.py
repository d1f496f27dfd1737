"""plif's Spikformer: SpikingJelly's parameter counts, the same function as SpikingJelly's Spikformer given its
weights (through plif.from_spikingjelly, the same state_dict keys), the one-line refusals, and one training
step through ``plif train --model spikformer``."""
from __future__ import annotations

import json

import pytest
import torch

import plif
from plif.models.residual import parameter_count
from plif.models.spikformer import TRANSFORMER_ZOO, spikformer


def _sj_spikformer():
    from sj_testing import sj

    s = sj()
    from plif.bench.spikingjelly import spikingjelly_model

    return s, spikingjelly_model("spikformer")


def _count_meta(build):
    with torch.device("meta"):
        return parameter_count(build())


def test_counts_match_spikingjelly():
    """Spikformer-4-384 (CIFAR, 9,310,906: the paper's 9.32M) and Spikformer-6-384 on 224x224 (patch 16)."""
    _, sf = _sj_spikformer()
    assert _count_meta(lambda: spikformer((3, 32, 32), 10, fused=False)) == 9_310_906
    assert _count_meta(lambda: sf.spikformer_cifar10(num_classes=10)) == 9_310_906
    ours = _count_meta(lambda: spikformer((3, 224, 224), 1000, depth=6, fused=False))
    assert ours == _count_meta(lambda: sf.spikformer_s(num_classes=1000))


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_is_spikingjellys_given_its_weights(mode):
    """SpikingJelly's Spikformer converted and plif's own hold the same state_dict keys; loaded with the same
    weights (and BatchNorm statistics), the same outputs in float64, and the same gradients."""
    s, sf = _sj_spikformer()
    from plif.interop import from_spikingjelly

    torch.manual_seed(0)
    theirs = sf.Spikformer(T=3, img_size_h=16, img_size_w=16, patch_size=4, num_classes=10, embed_dims=32,
                           num_heads=2, depths=2).double()
    x = torch.rand(3, 2, 3, 16, 16, dtype=torch.float64) * 3
    with torch.no_grad():  # BN's scale and shift such that the attention fires (with 1 and 0 it stays silent)
        for m in theirs.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(0.5, 1.5)
    if mode == "eval":  # running statistics from one batch, so that the evaluated network fires
        for m in theirs.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.momentum = 1.0
        with torch.no_grad():
            theirs(x)
        s.functional.reset_net(theirs)
    theirs.train(mode == "train")
    converted = from_spikingjelly(theirs, fuse=False)
    ours = spikformer((3, 16, 16), 10, width=32, heads=2, depth=2).double().train(mode == "train")
    assert list(ours.state_dict()) == list(converted.state_dict())
    ours.load_state_dict(converted.state_dict())
    want = theirs(x)
    fired = []
    ours.blocks[1].attn.attn_lif.register_forward_hook(lambda _m, _i, o: fired.append(float(o.detach().mean())))
    got = ours(x)
    assert want.abs().max() > 0 and fired[0] > 0
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12)
    want.sum().backward()
    got.sum().backward()
    sj_grads = [p.grad for p in theirs.parameters()]
    assert len(sj_grads) == len(list(ours.parameters()))
    for (name, p), q in zip(ours.named_parameters(), sj_grads):  # no convolution has a bias: none is zero by BN
        torch.testing.assert_close(p.grad, q, rtol=1e-9, atol=1e-12 * float(q.abs().max()), msg=name)


def test_fused_by_default_and_maps_time_first():
    net = spikformer((1, 28, 28), 10, width=16, heads=2, depth=1)
    assert plif.fused_blocks(net)  # the stem's conv -> BN -> LIF stages without pooling
    assert net(torch.rand(2, 3, 1, 28, 28)).shape == (2, 3, 10)
    assert net.patch_embed.stages[0].neuron.cfg.surrogate == "sigmoid"
    assert net.blocks[0].attn.attn_lif.cfg.v_threshold == 0.5


@pytest.mark.parametrize("kw,match", [
    (dict(width=20), r"width must be a multiple of 8 .*got 20"),
    (dict(width=32, heads=3), r"heads must divide width 32, got 3"),
    (dict(depth=0), r"depth must be a positive integer, got 0"),
    (dict(heads=True), r"heads must be a positive integer, got True"),
    (dict(mlp_ratio=0), r"mlp_ratio must be a positive number, got 0"),
    (dict(patch_size=8), r"patch_size must be 4 or 16 .*got 8"),
    (dict(neuron="QIF"), r"unknown neuron 'QIF'"),
])
def test_bad_options_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        spikformer((3, 32, 32), 10, fused=False, **kw)
    with pytest.raises(ValueError, match=r"input_shape \(C, H, W\), got \(3, 32\)"):
        spikformer((3, 32), 10, fused=False)


def test_zoo_entry_is_a_named_model_factory(capsys):
    import importlib

    from plif.cli.main import main
    from plif.models.factories import MODEL_FACTORIES

    module, attr = MODEL_FACTORIES["spikformer"].split(":")
    assert getattr(importlib.import_module(module), attr) is TRANSFORMER_ZOO["spikformer"][0]
    assert main(["zoo"]) == 0
    assert "spikformer        cifar10         input=3x32x32    params=   9,310,906  plif train --model spikformer" \
        in capsys.readouterr().out
    assert main(["zoo", "spikformer"]) == 0
    assert "dim=384, num_heads=12, scale=0.125" in capsys.readouterr().out


def test_one_training_step_through_the_command_line(tiny_fashion, tmp_path):
    """``plif train --model spikformer`` (Spikformer-4-384 as the zoo lists it) on 4 Fashion-MNIST-format
    images: one step, one evaluation, a checkpoint that loads back."""
    from plif.cli.main import main
    from plif.runs import load_run, read_metrics

    out = tmp_path / "run"
    argv = ["train", "--model", "spikformer", "--T", "2", "--batch-size", "4", "--epochs", "1",
            "--max-train-samples", "4", "--max-test-samples", "4", "--eval-batch-size", "4", "--device", "cpu",
            "--data-dir", str(tiny_fashion), "--out", str(out)]
    assert main(argv) == 0
    assert [r["epoch"] for r in read_metrics(out)] == [1]
    assert json.loads((out / "config.json").read_text())["model"] == "spikformer"
    net, _ = load_run(out, "last")
    saved = torch.load(out / "checkpoints" / "last.pt", weights_only=True)["model"]
    assert type(net).__name__ == "Spikformer" and all(torch.equal(v, saved[k]) for k, v in net.state_dict().items())
