"""The fused block's Triton kernels (``plif.kernels.triton_block``) equal its reference
(``plif.kernels.block_reference``).

Without a GPU the kernels run in Triton's interpreter, chosen when ``triton.jit`` decorates a
function: everything interpreted runs in one subprocess with ``TRITON_INTERPRET=1`` and reports
one JSON line per case.  The grid is every value of every factor and every pair of two factors'
values (T, plane shape with odd and even sides, pool, IF/LIF/PLIF, hard/soft, detached reset,
τ per layer or per channel, surrogate, ``v0`` and ``∂V_{T-1}`` given or not, ``∂k`` and ``V_{T-1}``
asked or not, fp32, bf16 or fp16 ``y``), plus the backward in several chunks.  Stated exactness:

- ``out``, ``place``, ``V_{T-1}`` bit-identical to the reference (fp32 state, so for half ``y`` too);
- ``g_z``, ``∂V_{-1}``, ``sum_g``, ``sum_gc`` within 1e-5 of the reference's largest magnitude
  (they differ by the chain rule's rounding order), ``∂k`` within 1e-4 (a sum over every neuron);
- BatchNorm's input gradient within 1e-5 (fp32, written over ``g_z``) or one half rounding (1e-2);
- the statistics within 1e-5 of ``torch.var_mean``;
- no load or store outside the tensors a launch was given (``tests/triton_bounds.py``: the
  interpreter itself reads any address, where a GPU may stop with an illegal address).
"""
import importlib.util

import pytest
import torch

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")

_INTERPRETED = r"""
import itertools, json, sys, torch
sys.path.insert(0, sys.argv[1])
import triton_bounds
triton_bounds.install()  # every load and store checked against the launch's tensors
from plif.kernels import triton_block_launch
from plif.kernels.block_reference import block_backward_reference, block_forward_reference, bn_input_grad
from plif.kernels.lowering_variants import cover
from plif.kernels.triton_block import (block_backward_triton, block_forward_triton, block_stats_triton,
                                       bn_input_grad_triton)
from plif.neurons.functional import NeuronConfig

FACTORS = dict(T=[3, 1], shape=[(2, 3, 5, 6), (1, 2, 4, 7), (2, 2, 3, 3)], pool=[True, False],
               neuron=["IF", "LIF", "PLIF"], hard=[True, False], detach=[True, False], k=["layer", "channel"],
               sg=["atan", "sigmoid", "rect", "triangle"], v0=[False, True], gv=[False, True], need_k=[True, False],
               state=[True, False], dtype=["float32", "bfloat16", "float16"])


def err(a, b):
    a, b = a.double(), b.double()
    return float((a - b).abs().max() / a.abs().max().clamp_min(1e-30)) if a.numel() else 0.0


def run(case, name):
    torch.manual_seed(len(name))
    T, (B, C, H, W) = case["T"], case["shape"]
    cfg = NeuronConfig(leak=case["neuron"] != "IF", v_reset=0.0 if case["hard"] else None,
                       detach_reset=case["detach"], surrogate=case["sg"])
    y = (torch.randn(T, B, C, H, W) * 2 + 0.5).to(getattr(torch, case["dtype"]))
    var, mean = torch.var_mean(y.float(), dim=(0, 1, 3, 4), correction=0)
    invstd = (var + 1e-5).rsqrt()
    scale = (torch.rand(C) + 0.5) * invstd * torch.where(torch.rand(C) < 0.8, 1.0, -1.0)
    shift = torch.rand(C) * 0.6 + 0.4 - mean * scale
    k = torch.rand(C if case["k"] == "channel" else 1) * 0.5 + 0.3
    v0 = torch.randn(B, C, H, W) * 0.5 if case["v0"] else None
    ref = block_forward_reference(y, scale, shift, k, v0, cfg, case["pool"], case["state"])
    got = block_forward_triton(y, scale, shift, k, v0, cfg, case["pool"], case["state"])
    g_out = torch.randn(ref[0].shape).to(y.dtype)
    g_v = torch.randn(B, C, H, W) if case["gv"] else None
    rb = block_backward_reference(y, scale, shift, mean, k, v0, cfg, case["pool"], ref[1], g_out, g_v, case["need_k"])
    gb = block_backward_triton(y, scale, shift, mean, k, v0, cfg, case["pool"], got[1], g_out, g_v, case["need_k"])
    out = {"case": name, "out": torch.equal(ref[0], got[0]) and ref[0].dtype == got[0].dtype,
           "place": torch.equal(ref[1], got[1]) and got[1].dtype == torch.uint8, "v_last": torch.equal(ref[2], got[2]),
           "shapes": [tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype for a, b in zip(rb, gb)],
           "spikes": float(ref[0].float().mean()), "g_k_ref": float(rb[2].abs().max())}
    for i, key in enumerate(("g_z", "g_v0", "g_k", "sum_g", "sum_gc")):
        out[key] = err(rb[i], gb[i])
    out["g_v0_checked"] = v0 is not None
    for training in (True, False):
        a = bn_input_grad(rb[0], y, mean, invstd, scale, rb[3], rb[4], training)
        g_z = gb[0].clone()
        b = bn_input_grad_triton(g_z, y, mean, invstd, scale, gb[3], gb[4], training)
        out[f"g_y_{'train' if training else 'eval'}"] = err(a, b) if a.dtype == b.dtype else 1.0
        out["g_y_over_g_z"] = (b is g_z) == (y.dtype == torch.float32)  # fp32: written over g_z
    m, v = block_stats_triton(y)
    out["stats"] = max(err(mean, m), err(var, v))
    out["out_of_bounds"] = triton_bounds.take()
    return out


rows = [dict(zip(FACTORS, values)) for values in itertools.product(*FACTORS.values())]
rows = [r for r in rows if not (r["neuron"] == "IF" and (r["k"] == "channel" or not r["need_k"]))]
for case in cover(rows):
    name = "-".join(str(v).replace(" ", "") for v in case.values())
    print(json.dumps({"group": "grid", **run(case, name)}), flush=True)
# the backward in chunks: T = 5 with chunks of 2 steps (2 + 2 + 1: a sweep, stored potentials, a partial chunk)
triton_block_launch.MAX_CHUNK = 2
for pool, neuron in ((True, "PLIF"), (False, "LIF")):
    case = dict(T=5, shape=(2, 2, 5, 4), pool=pool, neuron=neuron, hard=pool, detach=not pool, k="channel",
                sg="atan", v0=True, gv=True, need_k=True, state=True, dtype="float32")
    print(json.dumps({"group": "chunks", **run(case, f"chunks-{pool}-{neuron}")}), flush=True)
triton_block_launch.MAX_CHUNK = 20
# ties: every window all-spiking or all-silent, where max_pool2d's first maximum decides the place
y = torch.zeros(2, 1, 2, 4, 4)
y[:, :, 0] = 5.0
cfg = NeuronConfig(leak=False)
ref = block_forward_reference(y, torch.ones(2), torch.zeros(2), torch.ones(1), None, cfg, True)
got = block_forward_triton(y, torch.ones(2), torch.zeros(2), torch.ones(1), None, cfg, True)
print(json.dumps({"group": "ties", "case": "ties", "out": torch.equal(ref[0], got[0]),
                  "place": torch.equal(ref[1], got[1]), "places": sorted(set(got[1].flatten().tolist()))}))
# the fused block's autograd step on these kernels, its statistics included, against nn.BatchNorm2d
# (training mode) -> PLIF -> max_pool2d; y's mean far from 0, as a conv output's may be
import copy
import torch.nn.functional as F
from torch import nn
from plif.layers import fused_block as fb
from plif.neurons import PLIF
for dtype in ("float32", "bfloat16"):
    torch.manual_seed(3)
    y = (torch.randn(3, 2, 3, 6, 6) * 2 + 40.0).to(getattr(torch, dtype))
    bn, neuron = nn.BatchNorm2d(3), PLIF(backend="triton", v_threshold=0.5)
    ref_bn, ref_neuron = copy.deepcopy(bn), PLIF(backend="reference", v_threshold=0.5)
    kernels = fb.block_kernels(neuron, y.device, y.dtype)
    got_y, ref_y = y.clone().requires_grad_(True), y.float().requires_grad_(True)
    out = fb.fused_block(got_y, bn, neuron, True, kernels)[0]
    z = ref_bn(ref_y.flatten(0, 1)).unflatten(0, (3, 2))
    ref = F.max_pool2d(ref_neuron(z).flatten(0, 1), 2, 2).unflatten(0, (3, 2))
    g_out = torch.randn(ref.shape)
    out.float().backward(g_out)
    ref.backward(g_out)
    print(json.dumps({"group": "module", "case": dtype, "kernels": kernels.name,
                      "stats_fn": kernels.stats.__name__, "spikes": float(ref.detach().mean()),
                      "out": torch.equal(out.float(), ref), "running_mean": err(ref_bn.running_mean, bn.running_mean),
                      "running_var": err(ref_bn.running_var, bn.running_var),
                      "batches": int(bn.num_batches_tracked), "g_y": err(ref_y.grad, got_y.grad),
                      "g_w": max(err(a.grad, b.grad) for a, b in ((ref_bn.weight, bn.weight), (ref_bn.bias, bn.bias),
                                                                   (ref_neuron.w, neuron.w))),
                      "out_of_bounds": triton_bounds.take()}))
# the bounds check itself: a kernel reading four elements past its input is reported, one within it is not
import triton, triton.language as tl
@triton.jit
def _copy(x_ptr, y_ptr, n, EXTRA: tl.constexpr):
    i = tl.arange(0, 16)
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < n + EXTRA, other=0.0), mask=i < n)
for extra in (0, 4):
    _copy[(1,)](torch.ones(8), torch.empty(8), 8, EXTRA=extra)
    print(json.dumps({"group": "bounds", "case": f"extra{extra}", "out_of_bounds": triton_bounds.take()}))
# the operators' schemas (the fake-tensor parts of opcheck cannot run in the interpreter: see test_custom_ops)
from torch.library import opcheck
y, c = torch.randn(3, 2, 2, 5, 4), torch.rand(2) + 0.5
fwd = (y, c, c, c, torch.randn(2, 2, 5, 4), True, True, 1.0, 0.0, True, True)
out, place, _ = torch.ops.plif.block_forward(*fwd)
bwd = (y, c, c, c, c, None, place, torch.randn(out.shape), torch.randn(2, 2, 5, 4), True, True, False, 0, 1.0, 3.14,
       1.0, 0.0, True, True)
g = torch.ops.plif.block_backward(*bwd)
bn = (g[0], y, c, c, c, g[3], g[4], True)
for name, args in (("block_forward", fwd), ("block_backward", bwd), ("bn_input_grad", bn), ("bn_input_grad_", bn),
                   ("block_stats", (y,))):
    checks = opcheck(getattr(torch.ops.plif, name).default, args, test_utils=("test_schema", "test_autograd_registration"))
    print(json.dumps({"group": "opcheck", "case": name, "checks": checks}))
"""


def _check(r):
    assert r["out"] and r["place"] and r["v_last"], r
    assert all(r["shapes"]), r
    assert r["g_z"] < 1e-5 and r["sum_g"] < 1e-5 and r["sum_gc"] < 1e-5 and r["g_k"] < 1e-4, r
    assert r["g_v0"] < 1e-5 or not r["g_v0_checked"], r
    half = "float16" in r["case"]  # bfloat16 or float16: ∂L/∂y is rounded to y's dtype
    assert r["g_y_train"] < (1e-2 if half else 1e-5) and r["g_y_eval"] < (1e-2 if half else 1e-5), r
    assert r["stats"] < 1e-5, r
    assert r["g_y_over_g_z"], r
    assert not r["out_of_bounds"], r  # an access past a tensor: on the GPU a crash or garbage


@pytest.mark.slow  # the module's one interpreter run: ~13 s on the 2-core machine
def test_grid_matches_reference(interpreted):
    """Every factor's values and every pair of two factors' values: forward bit-identical,
    gradients to rounding (see the module docstring)."""
    grid = interpreted["grid"]
    assert len(grid) >= 12
    for r in grid.values():
        _check(r)
    # the grid is not vacuous: neurons fired, and ∂k was non-zero where it was asked for
    assert sum(0.05 < r["spikes"] < 0.95 for r in grid.values()) >= 2 * len(grid) // 3
    assert any(r["g_k_ref"] > 0 for r in grid.values())


@pytest.mark.slow
def test_backward_in_chunks_matches_reference(interpreted):
    """A first sweep storing the potential entering each chunk, then chunk by chunk backwards,
    the last chunk past T: the same results as one chunk."""
    chunks = interpreted["chunks"]
    assert len(chunks) == 2
    for r in chunks.values():
        _check(r)


@pytest.mark.slow
def test_the_fused_block_step_on_triton_matches_batchnorm_and_the_neuron(interpreted):
    """Training mode through ``plif.layers.fused_block`` on the Triton kernels: the statistics are
    the one-read kernel's (``block_stats_triton``, not a fp32 copy of a bf16 ``y``), and the running
    mean and (unbiased) variance equal ``nn.BatchNorm2d``'s to rounding, with ``y``'s mean 20
    standard deviations from 0; spikes equal, gradients to rounding (fp32; bf16 rounds ∂y)."""
    results = interpreted["module"]
    assert set(results) == {"float32", "bfloat16"}
    for r in results.values():
        assert r["kernels"] == "triton" and r["stats_fn"] == "block_stats_triton", r
        assert r["running_mean"] < 1e-6 and r["running_var"] < 1e-5 and r["batches"] == 1, r
        assert 0.05 < r["spikes"] < 0.95 and not r["out_of_bounds"], r
    assert results["float32"]["out"] and results["float32"]["g_y"] < 1e-5 and results["float32"]["g_w"] < 1e-4
    assert results["bfloat16"]["g_y"] < 1e-2 and results["bfloat16"]["g_w"] < 1e-2


@pytest.mark.slow
def test_the_bounds_check_reports_a_load_past_a_tensor(interpreted):
    r = interpreted["bounds"]
    assert r["extra0"]["out_of_bounds"] == [] and r["extra4"]["out_of_bounds"] == [
        "_copy: load of 4 element(s) outside every tensor argument"], r


@pytest.mark.slow
def test_pool_ties_choose_the_first_maximum(interpreted):
    """All-spiking windows choose place 0, all-silent ones too, as ``max_pool2d`` does."""
    r = interpreted["ties"]["ties"]
    assert r["out"] and r["place"] and r["places"] == [0], r


@pytest.mark.slow
def test_operators_pass_opcheck_schema_and_autograd_registration(interpreted):
    results = interpreted["opcheck"]
    assert set(results) == {"block_forward", "block_backward", "bn_input_grad", "bn_input_grad_", "block_stats"}
    for r in results.values():
        assert r["checks"] and all(v == "SUCCESS" for v in r["checks"].values()), r


def test_launch_choices_fit_every_plane_whatever_the_tuning():
    """What a launch must be, whatever the tuning (issue 48: the sizes themselves are not pinned): a
    power-of-two block (``tl.arange``), warps a power of two; a block larger than its plane needs is
    no larger than its warps' lanes (no program mostly idle); the backward has one pixel a thread; its
    chunks are the fewest that fit :data:`MAX_CHUNK`, balanced."""
    from plif.kernels.triton_block_launch import MAX_CHUNK, backward_launch, chunk_steps, forward_launch, plane_launch

    pow2 = lambda n: n > 0 and n & (n - 1) == 0  # noqa: E731
    for h in range(1, 70):
        for w in (1, 2, 3, 5, 8, 31, 64, 65, 128, 200):
            for what, launch, units in (("forward, pool", forward_launch(h, w, True), ((h + 1) // 2) * ((w + 1) // 2)),
                                        ("forward", forward_launch(h, w, False), h * w),
                                        ("backward", backward_launch(h, w), h * w), ("plane", plane_launch(h, w), h * w)):
                where = f"{what} {h}x{w}: {launch}"
                assert pow2(launch.block) and launch.num_warps in (1, 2, 4, 8), where
                assert launch.block <= max(1 << (units - 1).bit_length(), 32 * launch.num_warps), where
                if what == "backward":
                    assert launch.block == 32 * launch.num_warps, where
    for max_chunk in (None, 2, 7):
        limit = max_chunk or MAX_CHUNK
        for T in range(1, 3 * limit + 2):
            chunk = chunk_steps(T, max_chunk=max_chunk)
            chunks = -(-T // chunk)
            assert chunk <= limit and chunks == -(-T // limit), (T, max_chunk, chunk)
            assert chunk * chunks - T < chunks, (T, max_chunk, chunk)  # balanced: the last chunk short by < one a chunk


def test_bad_inputs_are_refused_with_the_argument_named():
    from plif.kernels.triton_block import block_backward_triton, block_forward_triton, bn_input_grad_triton
    from plif.neurons.functional import NeuronConfig
    from plif.surrogate import register_surrogate, unregister_surrogate

    one = torch.ones(1)
    with pytest.raises(ValueError, match=r"block_forward_triton: y must be \[T, B, C, H, W\]"):
        block_forward_triton(torch.zeros(2, 3, 4), one, one, one, None, NeuronConfig(), True)
    for dtype in (torch.long, torch.float64):
        with pytest.raises(ValueError, match=f"y's dtype {dtype} is not one of fp32, bf16, fp16"):
            block_forward_triton(torch.zeros(1, 1, 1, 2, 2, dtype=dtype), one, one, one, None, NeuronConfig(), True)
    y, c3 = torch.zeros(2, 1, 3, 5, 4), torch.ones(3)
    with pytest.raises(ValueError, match=r"block_forward_triton: shift must have shape \[3\] for y of shape"):
        block_forward_triton(y, c3, one, one, None, NeuronConfig(), True)
    with pytest.raises(ValueError, match=r"k must hold one value or one per channel \(3\), got shape \[2\]"):
        block_forward_triton(y, c3, c3, torch.ones(2), None, NeuronConfig(), True)
    with pytest.raises(ValueError, match=r"v0 must have shape \[1, 3, 5, 4\]"):
        block_forward_triton(y, c3, c3, one, torch.zeros(1, 3, 4, 5), NeuronConfig(), True)
    place = torch.zeros(2, 1, 3, 2, 2, dtype=torch.uint8)
    with pytest.raises(ValueError, match=r"g_out must have shape \[2, 1, 3, 2, 2\] for y of shape \[2, 1, 3, 5, 4\] "
                                         r"with the pool, got \[2, 1, 3, 5, 4\]"):
        block_backward_triton(y, c3, c3, c3, one, None, NeuronConfig(), True, place, torch.zeros_like(y), None)
    with pytest.raises(ValueError, match=r"bn_input_grad_triton: g_z must have shape \[2, 1, 3, 5, 4\]"):
        bn_input_grad_triton(torch.zeros(2, 1, 3, 5), y, c3, c3, c3, c3, c3, True)
    register_surrogate("h38t_open", grad=lambda x, alpha: torch.ones_like(x))
    try:
        y = torch.zeros(1, 1, 1, 2, 2)
        with pytest.raises(ValueError, match="surrogate 'h38t_open' has no closed form"):
            block_backward_triton(y, one, one, one, one, None, NeuronConfig(surrogate="h38t_open"), True,
                                  torch.zeros(1, 1, 1, 1, 1, dtype=torch.uint8), torch.zeros(1, 1, 1, 1, 1), None)
    finally:
        unregister_surrogate("h38t_open")


def test_ops_trace_with_fake_tensors_and_under_torch_compile_fullgraph():
    """What ``torch.compile`` needs: each launcher runs on fake (and symbolic) tensors without a
    device, giving the contract's shapes and dtypes, and Dynamo captures the four operators in one
    graph (the capturing backend never runs it: no GPU here)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from plif.kernels.triton_block import (block_backward_triton, block_forward_triton, block_stats_triton,
                                           bn_input_grad_triton)
    from plif.neurons.functional import NeuronConfig

    cfg = NeuronConfig(detach_reset=False, surrogate="sigmoid")

    def step(y, scale, shift, k, v0, g_out, g_v):
        out, place, v_last = block_forward_triton(y, scale, shift, k, v0, cfg, True, True)
        mean, var = block_stats_triton(y)
        g_z, g_v0, g_k, sum_g, sum_gc = block_backward_triton(y, scale, shift, mean, k, v0, cfg, True, place, g_out,
                                                              g_v, True)
        return out, place, v_last, g_z, g_v0, g_k, sum_g, sum_gc, mean, var, bn_input_grad_triton(
            g_z, y.to(torch.bfloat16), mean, var, scale, sum_g, sum_gc, True)

    args = (torch.randn(3, 2, 4, 5, 7), torch.rand(4), torch.rand(4), torch.rand(4), torch.randn(2, 4, 5, 7),
            torch.randn(3, 2, 4, 2, 3), torch.randn(2, 4, 5, 7))
    expected = [((3, 2, 4, 2, 3), torch.float32), ((3, 2, 4, 2, 3), torch.uint8), ((2, 4, 5, 7), torch.float32),
                ((3, 2, 4, 5, 7), torch.float32), ((2, 4, 5, 7), torch.float32)] + [((4,), torch.float32)] * 5 + [
                ((3, 2, 4, 5, 7), torch.bfloat16)]
    for mode in ("fake", "symbolic"):
        graph = make_fx(step, tracing_mode=mode)(*args).graph
        out = next(n for n in graph.nodes if n.op == "output").args[0]
        assert [(tuple(int(d) for d in a.meta["val"].shape), a.meta["val"].dtype) for a in out] == expected, mode
    graphs = []

    def capture(gm, example_inputs):
        graphs.append(gm)
        raise torch._dynamo.exc.BackendCompilerFailed(capture, RuntimeError("captured"))

    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed):
        torch.compile(step, fullgraph=True, backend=capture, dynamic=True)(*args)
    ops = [str(n.target) for n in graphs[0].graph.nodes if str(n.target).startswith("plif.")]
    assert ops == ["plif.block_forward.default", "plif.block_stats.default", "plif.block_backward.default",
                   "plif.bn_input_grad.default"]
