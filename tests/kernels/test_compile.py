"""``torch.compile(fullgraph=True)`` of every zoo network and every CPU backend, changing batch sizes.

The zoo entries are rebuilt narrow (:func:`plif_testing.narrow_zoo`: the same layer sequence, a
few channels, tiny images), so a trace takes seconds.  Dynamo + AOTAutograd (``aot_eager``)
checks no graph break, fake implementations that agree with the kernels, symbolic batch sizes,
and the same spikes and gradients as eager.  Inductor, which is where ``plif train --compile``
used to crash (issue #10: ``cannot determine truth value of Relational``), is run on the default
backend of the Fashion-MNIST network, exactly as ``plif train --compile`` uses it: static first
batch, then a recompile for dynamic batches.

Which pairs are traced, and why that is enough: what differs between zoo networks (how many
blocks, their nesting, input channels, the sizes left after each pooling, the compiled max-pool
kernel on those sizes) is traced on the default backend (``auto``, the one training uses), for
every network (MNIST and Fashion-MNIST share one).  What differs between neuron backends is only how one neuron layer's sweep is
traced: ``cpu`` is a custom op with a fake implementation, ``bptt`` one ``autograd.Function``
that loops inside, ``reference`` a loop of per-step surrogate functions.  None of them looks at
the layers around it; each sees a convolution's ``[T, B, C, H, W]`` and a linear layer's
``[T, B, F]`` input, which every zoo network has.  So ``bptt`` and ``reference`` are traced once
each, on one network; tracing them on the others repeated the same neuron traces (14 of the
suite's 15 slowest tests).  That network (:data:`ONE_OF_EACH`) holds one neuron layer of each input
kind: a conv block's (conv, BN, neuron, max-pool) and a linear layer's, then dropout and the voting
layer; the other neuron variants are traced on it too.  A trace costs what its neuron layers do (the
``reference`` backend's is a loop of per-step functions), so it has two, not the zoo's four.
"""
from __future__ import annotations

import re

import pytest
import torch

from plif.catalog import DATASETS
from plif.models import build_network
from plif.neurons import available_backends
from plif_testing import narrow_zoo

T = 2
CLASSES = 32  # narrow_zoo's voting layer
BATCHES = (4, 6, 3)  # a training batch, a bigger evaluation batch, a short last batch
# each narrow zoo network's form once: networks whose layer sequences differ only in how often a block
# repeats share one trace (the static-image and event networks: {conv-BN-PLIF-pool}*n, then the
# classifier), whatever their input's channels and size, traced on the smallest of them
_FORMS: dict[str, tuple] = {}
for _name in DATASETS:
    _spec, _shape = narrow_zoo(_name)
    _form = re.sub(r"\}\*\d+", "}*n", _spec)
    _known = _FORMS.get(_form, (None, None, []))
    _smaller = _known[1] is None or torch.Size(_shape).numel() < torch.Size(_known[1]).numel()
    _FORMS[_form] = ((_spec, _shape) if _smaller else _known[:2]) + (_known[2] + [_name],)
NETWORKS: dict[tuple, list[str]] = {(spec, shape): names for spec, shape, names in _FORMS.values()}
# the backends ``auto`` does not pick on CPU tensors: one network each (see the module docstring)
OTHER_BACKENDS = [b for b in ("bptt", "reference") if b in available_backends()]
# one neuron layer after a conv block ([T, B, C, H, W]) and one after a linear layer ([T, B, F])
ONE_OF_EACH = ("c8k3s1-BN-PLIF-MPk2s2-DP-FC320-PLIF-APk10s10", (1, 12, 12))


def test_narrow_zoo_keeps_each_networks_layer_sequence():
    """Only the widths change (convolution channels, linear features): the tokens, kernel sizes,
    strides and nesting are the zoo's, and the voting layer gives 32 classes."""
    widths = lambda spec: re.sub(r"(c|FC)\d+", r"\1#", spec)  # noqa: E731
    for name, entry in DATASETS.items():
        spec, shape = narrow_zoo(name)
        assert widths(spec) == widths(entry.network) and shape[0] == entry.input_shape[0], name
        net = build_network(spec, shape, T)
        assert net(torch.rand(1, *shape)).shape == (T, 1, CLASSES), name


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
        y = torch.randint(0, CLASSES, (b,), generator=gen)
        out_c, g_c = _run(net, compiled, x, y)
        out_e, g_e = _run(net, net, x, y)
        assert out_c.shape == out_e.shape == (net.T, b, out_e.shape[-1])
        if exact:
            assert torch.equal(out_c, out_e), f"batch {b}: compiled spikes differ from eager"
        else:  # Inductor may reassociate the BN/conv arithmetic: allow a very rare flipped spike
            assert (out_c != out_e).float().mean() < 0.02, f"batch {b}"
        for a, e in zip(g_c, g_e):
            torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)


def _traces_as_one_graph_with_dynamic_batch(spec, shape, **kwargs):
    torch.manual_seed(0)
    net = build_network(spec, shape, T, **kwargs)
    torch._dynamo.reset()
    compiled = torch.compile(net, fullgraph=True, backend="aot_eager")  # raises on a graph break

    def with_dynamic_batch(x):  # trace once with a symbolic batch instead of recompiling
        torch._dynamo.mark_dynamic(x, 0)
        return compiled(x)
    _compare(net, with_dynamic_batch, shape, BATCHES)


@pytest.mark.parametrize("network", list(NETWORKS), ids=["+".join(names) for names in NETWORKS.values()])
def test_zoo_network_traces_as_one_graph_with_dynamic_batch(network):
    _traces_as_one_graph_with_dynamic_batch(*network)


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_other_backends_trace_as_one_graph_with_dynamic_batch(backend):
    _traces_as_one_graph_with_dynamic_batch(*ONE_OF_EACH, backend=backend)


@pytest.mark.slow
def test_inductor_compiles_the_default_path_across_batch_sizes():
    """The ``plif train --compile`` regression (issue #10) was in Inductor's compile for a symbolic
    batch, which ``plif train --compile`` reaches at its second batch size.  The batch is marked
    dynamic from the first call, so that graph is the one compiled, once: the static first compile
    added ~30 s on a cold cache and nothing plif-specific.  The batches stay above Inductor's own
    accumulation threshold here (1152·B > 4096): a batch of 3 recompiles for Inductor's reasons."""
    import torch._inductor.config as inductor_config

    spec, shape = narrow_zoo("fashion-mnist")
    torch.manual_seed(0)
    net = build_network(spec, shape, T)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(net, fullgraph=True)

    def with_dynamic_batch(x):
        torch._dynamo.mark_dynamic(x, 0)
        return compiled(x)
    with inductor_config.patch(fallback_random=True):  # dropout draws like eager
        _compare(net, with_dynamic_batch, shape, (4, 6, 5), exact=False)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1, "recompiled"


@pytest.mark.parametrize("kwargs", [{"per_channel_tau": True, "v_reset": None, "detach_reset": False},
                                    {"neuron": "IF", "surrogate": "sigmoid"}], ids=["per-channel-soft", "IF"])
def test_other_neuron_variants_trace_on_the_default_backend(kwargs):
    _traces_as_one_graph_with_dynamic_batch(*ONE_OF_EACH, **kwargs)


def test_a_second_compile_traces_the_fused_blocks_backward():
    """The fused block's backward asked its ∂z for its layout, which Dynamo cannot answer in a backward
    it speculates; its retry then failed ("lift_tracked_freevar_to_input") once another network had
    been compiled in the process: the GPU script compiles several variants in one process."""
    from plif.models.memory import MEMORY_PRESETS

    torch.manual_seed(0)
    x = torch.rand(2, 1, 12, 12)
    first = build_network("c4k3s1-BN-IF-MPk2s2-FC10-IF", (1, 12, 12), 2, surrogate="sigmoid")
    torch._dynamo.reset()
    torch.compile(first, fullgraph=True, backend="aot_eager")(x).sum().backward()
    for memory in ("fused", "exact"):  # ∂y written over a fresh ∂z, and over the recomputed conv output
        net = build_network("c4k3s1-BN-PLIF-c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF", (1, 12, 12), 1)
        net.set_memory(MEMORY_PRESETS[memory])
        torch.compile(net, backend="eager")(x).sum().backward()
        assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in net.parameters())
