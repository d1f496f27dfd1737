"""``torch.compile(fullgraph=True)`` of every zoo network, every CPU backend, changing batch sizes.

The six zoo entries are rebuilt narrow (same token kinds and nesting, a few channels, tiny
images), so a trace takes seconds.  Dynamo + AOTAutograd (``aot_eager``) checks every
(network, backend) pair: no graph break, fake implementations that agree with the kernels,
symbolic batch sizes, and the same spikes and gradients as eager.  Inductor, which is where
``plif train --compile`` used to crash (issue #10: ``cannot determine truth value of
Relational``), is run on the default backend of the Fashion-MNIST network, exactly as
``plif train --compile`` uses it: static first batch, then a recompile for dynamic batches.
"""
from __future__ import annotations

import pytest
import torch

from plif.models import build_network, get_entry
from plif.neurons import available_backends

# zoo entry -> (narrow spec with the same tokens, tiny input shape, T)
NARROW = {
    "mnist": ("{c4k3s1-BN-PLIF-MPk2s2}*2-DP-FC16-PLIF-DP-FC20-PLIF-APk2s2", (1, 8, 8), 2),
    "fashion-mnist": ("{c4k3s1-BN-PLIF-MPk2s2}*2-DP-FC16-PLIF-DP-FC20-PLIF-APk2s2", (1, 12, 12), 2),
    "nmnist": ("{c4k3s1-BN-PLIF-MPk2s2}*2-DP-FC16-PLIF-DP-FC20-PLIF-APk2s2", (2, 10, 10), 2),
    "cifar10": ("{{c4k3s1-BN-PLIF}*3-MPk2s2}*2-DP-FC16-PLIF-DP-FC20-PLIF-APk2s2", (3, 8, 8), 2),
    "cifar10-dvs": ("{c4k3s1-BN-PLIF-MPk2s2}*4-DP-FC16-PLIF-DP-FC20-PLIF-APk2s2", (2, 16, 16), 2),
    "dvs128-gesture": ("{c4k3s1-BN-PLIF-MPk2s2}*5-DP-FC16-PLIF-DP-FC22-PLIF-APk2s2", (2, 32, 32), 2),
}
BATCHES = (4, 6, 3)  # a training batch, a bigger evaluation batch, a short last batch
# the default CPU path first; the PyTorch-loop backends unroll T steps per neuron and trace slower
CPU_BACKENDS = [pytest.param(b, marks=[pytest.mark.slow] if b != "cpu" else [])
                for b in ("cpu", "bptt", "reference") if b in available_backends()]


def test_narrow_specs_keep_the_zoo_token_kinds():
    import re

    kinds = lambda spec: sorted(set(re.findall(r"[A-Za-z]+", spec)))  # noqa: E731
    for name, (spec, shape, _) in NARROW.items():
        entry = get_entry(name)
        assert kinds(spec) == kinds(entry.network), name
        assert spec.count("{") == entry.network.count("{") and shape[0] == entry.input_shape[0], name


def _run(net, fn, x, y):
    """Spikes and parameter gradients of one forward/backward with a fixed dropout draw."""
    net.zero_grad(set_to_none=True)
    torch.manual_seed(123)
    out = fn(x)
    ((out.mean(0) - torch.nn.functional.one_hot(y, out.shape[-1])) ** 2).mean().backward()
    return out.detach(), [p.grad.clone() for p in net.parameters()]


def _compare(net, compiled, shape, batches, exact=True):
    for b in batches:
        gen = torch.Generator().manual_seed(b)
        x = torch.rand(b, *shape, generator=gen) * 4
        y = torch.randint(0, 10, (b,), generator=gen)
        out_c, g_c = _run(net, compiled, x, y)
        out_e, g_e = _run(net, net, x, y)
        assert out_c.shape == out_e.shape == (net.T, b, out_e.shape[-1])
        if exact:
            assert torch.equal(out_c, out_e), f"batch {b}: compiled spikes differ from eager"
        else:  # Inductor may reassociate the BN/conv arithmetic: allow a very rare flipped spike
            assert (out_c != out_e).float().mean() < 0.02, f"batch {b}"
        for a, e in zip(g_c, g_e):
            torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("name", list(NARROW))
def test_zoo_network_traces_as_one_graph_with_dynamic_batch(name, backend):
    spec, shape, T = NARROW[name]
    torch.manual_seed(0)
    net = build_network(spec, shape, T, backend=backend)
    torch._dynamo.reset()
    compiled = torch.compile(net, fullgraph=True, backend="aot_eager")  # raises on a graph break

    def with_dynamic_batch(x):  # trace once with a symbolic batch instead of recompiling
        torch._dynamo.mark_dynamic(x, 0)
        return compiled(x)
    _compare(net, with_dynamic_batch, shape, BATCHES)


@pytest.mark.slow
def test_inductor_compiles_the_default_path_across_batch_sizes():
    """The ``plif train --compile`` regression: static first batch, then dynamic ones, Inductor."""
    import torch._inductor.config as inductor_config

    spec, shape, T = NARROW["fashion-mnist"]
    torch.manual_seed(0)
    net = build_network(spec, shape, T)
    torch._dynamo.reset()
    compiled = torch.compile(net, fullgraph=True)
    with inductor_config.patch(fallback_random=True):  # dropout draws like eager
        _compare(net, compiled, shape, BATCHES, exact=False)


@pytest.mark.parametrize("kwargs", [{"per_channel_tau": True, "v_reset": None, "detach_reset": False},
                                    {"neuron": "IF", "surrogate": "sigmoid"}], ids=["per-channel-soft", "IF"])
def test_other_neuron_variants_trace_on_the_default_backend(kwargs):
    spec, shape, T = NARROW["mnist"]
    torch.manual_seed(0)
    net = build_network(spec, shape, T, **kwargs)
    torch._dynamo.reset()
    compiled = torch.compile(net, fullgraph=True, backend="aot_eager")

    def with_dynamic_batch(x):
        torch._dynamo.mark_dynamic(x, 0)
        return compiled(x)
    _compare(net, with_dynamic_batch, shape, BATCHES)
