"""Every Triton kernel variant lowers for an H100 on the CPU, with eager and with Inductor scalar types.

Issue 29: under ``torch.compile`` Inductor passed the kernels' float scalars as fp64 and
``_forward_kernel`` failed to compile ("Loop-carried variable v has initial type fp32 but is
re-assigned to fp64").  Triton lowers an ``ASTSource`` for ``GPUTarget("cuda", 90, 32)`` without a
GPU, so each variant the launchers can ask for is lowered here as far as TTGIR, twice: fp32/i32
scalars (an eager launch) and fp64/i64 (Inductor), and the second must hold no fp64 tensor.
"""
import importlib.util
import itertools
import os

import pytest

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed"),
    pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1",
                       reason="TRITON_INTERPRET=1 makes the kernels interpreted functions, which do not lower"),
]


def _api_or_skip():
    try:
        from triton._C.libtriton import ir  # noqa: F401
        from triton.compiler import ASTSource  # noqa: F401
        from triton.compiler.compiler import make_backend  # noqa: F401
    except ImportError as e:
        pytest.skip(f"this Triton lacks the ASTSource/make_backend lowering API (3.x has it): {e}")


def _variants():
    from plif.kernels.lowering import covering_variants

    return covering_variants()


VARIANTS = _variants() if importlib.util.find_spec("triton") else []


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_kernel_variant_lowers_with_fp32_and_fp64_scalars(variant):
    _api_or_skip()
    from plif.kernels.lowering import _FLOATS, _kernel, fp64_tensors, lower

    assert "tt.func" in lower(variant, "eager")
    ttgir = lower(variant, "inductor")  # raised CompilationError (fp32 state re-assigned to fp64) before
    floats = any(name in _FLOATS for name in _kernel(variant.kernel).arg_names)  # the block's elementwise: none
    assert ("f64" in ttgir) == floats and not fp64_tensors(ttgir), fp64_tensors(ttgir)[:3]


def test_lowered_set_covers_every_value_and_pair_the_launchers_use():
    """The all-pairs set misses no flag value, no pair of two factors' values, no launch shape."""
    from plif.kernels import lowering as L
    from plif.kernels.lowering_variants import cover

    for kernel, rows in (("forward", L._forward_rows()), ("backward", L._backward_rows())):
        rows = list(rows)
        chosen = cover(rows)
        pairs = lambda rs: {p for r in rs for p in itertools.combinations(sorted(r.items()), 2)}  # noqa: E731
        assert pairs(chosen) == pairs(rows), kernel
        lowered = [v for v in VARIANTS if v.kernel == kernel]
        assert {(dict(v.flags)["BLOCK"], v.num_warps) for v in lowered} == {
            (s.block, s.num_warps) for s in L.launches()}, kernel


def test_block_lowered_set_covers_every_value_pair_launch_and_chunk():
    """The fused block's kernels (:mod:`plif.kernels.lowering_block`): every value and pair of
    flags, every launch shape of each kind (pooled or not), the short backward chunks; ``--all``
    adds every chunk length the launcher can choose."""
    from plif.kernels import lowering_block as LB
    from plif.kernels.triton_block_launch import MAX_CHUNK, chunk_steps

    def factors(v):  # a variant's flags, dtype and T = 1, without its launch shape and chunk
        return {**{k: x for k, x in v.flags if k not in ("BLOCK", "CHUNK")}, "x": v.x_dtype, "unit": v.unit_sizes}

    pairs = lambda vs: {p for v in vs for p in itertools.combinations(sorted(factors(v).items()), 2)}  # noqa: E731
    for kernel in LB.BLOCK_KERNELS:
        lowered = [v for v in VARIANTS if v.kernel == kernel]
        every = [LB._variant(kernel, r, LB.block_launches(kernel)[0]) for r in LB.block_rows(kernel)]
        assert pairs(lowered) == pairs(every), kernel
        kinds = {dict(v.flags).get("POOL", False) for v in lowered}
        shapes = {(dict(v.flags).get("POOL", False), dict(v.flags)["BLOCK"], v.num_warps) for v in lowered}
        assert shapes == {(pool, s.block, s.num_warps) for pool in kinds for s in LB.block_launches(kernel, pool)}, kernel
        assert {v.x_dtype for v in lowered} == {"float32", "bfloat16", "float16"}, kernel
    backward = [dict(v.flags) for v in VARIANTS if v.kernel == "block_backward"]
    assert {f["CHUNK"] for f in backward} == set(LB._COVER_CHUNKS)
    for flag in ("POOL", "LEAK", "HARD", "DETACH", "PER_CHANNEL", "HAS_V0", "HAS_GV", "NEED_K"):
        assert {f[flag] for f in backward} == {False, True}, flag
    assert {chunk_steps(t) for t in range(1, 200)} == set(range(1, MAX_CHUNK + 1))
    every = {dict(v.flags)["CHUNK"] for v in LB.block_all_variants() if v.kernel == "block_backward"}
    assert every == set(range(1, MAX_CHUNK + 1))


def test_launch_flags_name_every_constexpr_of_the_kernels():
    """A constexpr added to a kernel but not to its flags (or the reverse) would go unlowered."""
    import inspect

    from plif.kernels import triton_neuron
    from plif.kernels.triton_launch import backward_flags, forward_flags

    from plif.kernels import triton_block
    from plif.kernels import triton_block_launch as B

    for kernel, flags in ((triton_neuron._forward_kernel, forward_flags(True, True, True, 16)),
                          (triton_neuron._backward_kernel, backward_flags(True, True, True, 0, True, True, 16)),
                          (triton_block._block_forward_kernel, B.forward_flags(True, True, True, True, True, True, 16)),
                          (triton_block._block_backward_kernel,
                           B.backward_flags(True, True, True, True, 0, True, True, True, True, 3, 32)),
                          (triton_block._bn_input_grad_kernel, B.input_grad_flags(True, 16)),
                          (triton_block._block_stats_kernel, B.stats_flags(16))):
        params = inspect.signature(kernel.fn).parameters.values()
        constexprs = {p.name for p in params if "constexpr" in str(p.annotation)}
        assert constexprs == set(flags), kernel.fn.__name__


def test_num_stages_leaves_the_time_loops_alone():
    """``triton_launch`` says ``num_stages`` is not a lever (no pipelining without ``tl.dot``):
    the TTGIR is the same for 1 and 3 stages."""
    _api_or_skip()
    from plif.kernels.lowering import lower

    v = next(v for v in VARIANTS if v.kernel == "forward" and dict(v.flags)["BLOCK"] == 1024)
    assert lower(v, num_stages=1) == lower(v, num_stages=3)
