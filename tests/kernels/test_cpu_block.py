"""The compiled CPU fused block (``plif.kernels.cpu_block``) against ``block_reference``: spikes, the
pool's places and ``V_{T-1}`` bit for bit, gradients to rounding, ``∂y`` bit for bit."""
import itertools

import pytest
import torch
from torch.library import opcheck

from plif.kernels.block_check import BlockCase, block_grid, make_block_inputs, run_block_case
from plif.kernels.block_reference import block_backward_reference, block_forward_reference, pooled_place
from plif.kernels.cpu_build import load_library
from plif.neurons.functional import NeuronConfig

pytestmark = pytest.mark.skipif(load_library() is None, reason="no C++ compiler: the fused block runs the reference")

if load_library() is not None:
    from plif.kernels import cpu_block as cb
    FNS = (cb.block_forward_cpu, cb.block_backward_cpu, cb.bn_input_grad_cpu)


@pytest.mark.parametrize("case", block_grid(quick=True), ids=lambda c: c.name)
def test_cpu_block_matches_reference(case):
    r = run_block_case(case, *FNS)
    assert r["ok"], r


@pytest.mark.parametrize("shape", [(3, 1, 2, 7, 37), (2, 2, 2, 4, 64)], ids=["odd", "even"])
def test_pool_gradient_on_long_rows(shape):
    """Rows of 16 windows or more route the pool's gradient a whole row at a time (the quick grid's
    rows are shorter: a scatter), an odd H's last row and W's last column left at zero: the reference's."""
    r = run_block_case(BlockCase(shape, "PLIF", "channel", need_state=True), *FNS)
    assert r["ok"], r


def test_pool_ties_and_empty_windows_as_max_pool2d():
    """Every pattern of spikes in a 2×2 window (none, one, several): the place max_pool2d picks."""
    patterns = torch.tensor(list(itertools.product([0.0, 1.0], repeat=4)))  # [16, 4]: (dy, dx) row by row
    y = patterns.view(16, 2, 2).permute(1, 0, 2).reshape(1, 1, 1, 2, 32) * 2  # 16 windows side by side
    cfg = NeuronConfig(leak=False)  # IF from rest: a spike wherever y >= 1
    one, zero = torch.ones(1), torch.zeros(1)
    out, place, _ = cb.block_forward_cpu(y, one, zero, one, None, cfg, True)
    _, ref_place = pooled_place((y >= 1).float())
    assert torch.equal(place, ref_place)
    assert place.flatten().tolist() == [0, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0]
    assert torch.equal(out.flatten(), (patterns.sum(1) > 0).float())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_static_y_is_read_in_place(dtype):
    """A y repeated over T (stride 0: a static input's hoisted convolution) gives what the repeated
    copy gives, forward and backward."""
    a = make_block_inputs(BlockCase((4, 2, 3, 6, 5), "PLIF", "channel", dtype={torch.float32: "float32",
                                                                                 torch.bfloat16: "bfloat16"}[dtype]))
    y = a["y"][:1].expand(4, *a["y"].shape[1:])
    fa = lambda y: (y, a["scale"], a["shift"], a["k"], None, a["cfg"], True, True)  # noqa: E731
    got, ref = cb.block_forward_cpu(*fa(y)), cb.block_forward_cpu(*fa(y.contiguous()))
    assert all(torch.equal(g, r) for g, r in zip(got, ref))
    ba = lambda y: (y, a["scale"], a["shift"], a["mean"], a["k"], None, a["cfg"], True, got[1], a["g_out"], None)  # noqa
    assert all(torch.equal(g, r) for g, r in zip(cb.block_backward_cpu(*ba(y)), cb.block_backward_cpu(*ba(y.contiguous()))))
    assert all(torch.equal(g, r) for g, r in zip(cb.batch_stats_cpu(y), cb.batch_stats_cpu(y.contiguous())))


def test_same_bits_on_one_and_two_threads():
    """Per-channel sums are per tile, then per channel in tile order: the thread count changes nothing."""
    a = make_block_inputs(BlockCase((5, 2, 3, 30, 41), "PLIF", "channel", need_state=True))
    fa = (a["y"], a["scale"], a["shift"], a["k"], a["v0"], a["cfg"], True, True)
    runs = []
    threads = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            out, place, v = cb.block_forward_cpu(*fa)
            back = cb.block_backward_cpu(a["y"], a["scale"], a["shift"], a["mean"], a["k"], a["v0"], a["cfg"], True,
                                         place, a["g_out"], a["g_v_last"])
            runs.append((out, place, v, *back, *cb.batch_stats_cpu(a["y"])))
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(x, y) for x, y in zip(*runs))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_batch_stats_equal_var_mean_in_double(dtype):
    y = (torch.randn(3, 2, 4, 7, 5, dtype=torch.float64) * 3 + 100).to(dtype)  # a mean far from 0
    mean, var = cb.batch_stats_cpu(y)
    var_ref, mean_ref = torch.var_mean(y.double(), dim=(0, 1, 3, 4), correction=0)
    torch.testing.assert_close(mean, mean_ref, rtol=1e-14, atol=0)
    torch.testing.assert_close(var, var_ref, rtol=1e-10, atol=0)


def test_input_grad_written_over_dz_equals_a_new_tensor():
    a = make_block_inputs(BlockCase((3, 2, 3, 6, 7), "PLIF"))
    g_z = torch.randn(a["y"].shape)
    args = (a["y"], a["mean"], a["invstd"], a["scale"], torch.randn(3), torch.randn(3), True)
    fresh = cb.bn_input_grad_cpu(g_z, *args)
    into = g_z.clone()
    assert cb.bn_input_grad_cpu_(into, *args) is into and torch.equal(into, fresh)


def test_bf16_y_reads_like_its_fp32_widening():
    """bf16 y (autocast): fp32 arithmetic, so exactly the fp32 kernel's values on ``y.float()``,
    spikes and ∂y rounded to bf16."""
    a = make_block_inputs(BlockCase((3, 2, 3, 6, 7), "PLIF", "channel", dtype="bfloat16", v0=True))
    fa = lambda y: (y, a["scale"], a["shift"], a["k"], a["v0"], a["cfg"], True, True)  # noqa: E731
    (o16, p16, v16), (o32, p32, v32) = cb.block_forward_cpu(*fa(a["y"])), cb.block_forward_cpu(*fa(a["y"].float()))
    assert o16.dtype == torch.bfloat16 and torch.equal(o16.float(), o32) and torch.equal(p16, p32)
    assert torch.equal(v16, v32)
    ba = lambda y, g: (y, a["scale"], a["shift"], a["mean"], a["k"], a["v0"], a["cfg"], True, p16, g, None)  # noqa
    b16 = cb.block_backward_cpu(*ba(a["y"], a["g_out"]))
    b32 = cb.block_backward_cpu(*ba(a["y"].float(), a["g_out"].float()))
    assert all(torch.equal(x, y) for x, y in zip(b16, b32))
    g_y = cb.bn_input_grad_cpu(b16[0], a["y"], a["mean"], a["invstd"], a["scale"], b16[3], b16[4], True)
    g_y32 = cb.bn_input_grad_cpu(b32[0], a["y"].float(), a["mean"], a["invstd"], a["scale"], b32[3], b32[4], True)
    assert g_y.dtype == torch.bfloat16 and torch.equal(g_y, g_y32.bfloat16())


def test_reference_runs_the_same_inputs():
    """The reference itself takes what the grid feeds it (a check of the check)."""
    a = make_block_inputs(BlockCase((2, 1, 2, 4, 4), "LIF", v0=True, need_state=True))
    out, place, v = block_forward_reference(a["y"], a["scale"], a["shift"], a["k"], a["v0"], a["cfg"], True, True)
    g = block_backward_reference(a["y"], a["scale"], a["shift"], a["mean"], a["k"], a["v0"], a["cfg"], True, place,
                                 a["g_out"], a["g_v_last"])
    assert out.shape == (2, 1, 2, 2, 2) and v.shape == (1, 2, 4, 4) and g[0].shape == a["y"].shape


@pytest.mark.parametrize("pool", [True, False])
def test_ops_pass_opcheck(pool):
    a = make_block_inputs(BlockCase((3, 2, 3, 4, 5), "PLIF", "channel", pool=pool, v0=True, need_state=True))
    cfg = a["cfg"]
    fwd = (a["y"], a["scale"], a["shift"], a["k"], a["v0"], True, True, 1.0, 0.0, pool, True)
    opcheck(torch.ops.plif.cpu_block_forward.default, fwd)
    _, place, _ = torch.ops.plif.cpu_block_forward(*fwd)
    from plif.surrogate import get_surrogate
    sg = get_surrogate(cfg.surrogate)
    bwd = (a["y"], a["scale"], a["shift"], a["mean"], a["k"], a["v0"], place, a["g_out"], a["g_v_last"], True, True,
           True, 1.0, 0.0, sg.code, *sg.kernel_constants(2.0), pool, True)
    opcheck(torch.ops.plif.cpu_block_backward.default, bwd)
    g_z = torch.randn(a["y"].shape)
    grad = (g_z, a["y"], a["mean"], a["invstd"], a["scale"], torch.randn(3), torch.randn(3), True)
    opcheck(torch.ops.plif.cpu_bn_input_grad.default, grad)
    opcheck(torch.ops.plif.cpu_batch_stats.default, (a["y"],))


def test_the_check_gives_an_input_gradient_written_over_its_argument_a_copy():
    """``bn_input_grad_cpu_`` writes ∂y over the ∂z it is given, as Triton's does for fp32: the check
    passes it a copy, so the reference is still computed from ∂z itself."""
    r = run_block_case(BlockCase((3, 2, 3, 6, 5), "PLIF", "channel"), cb.block_forward_cpu, cb.block_backward_cpu,
                       cb.bn_input_grad_cpu_)
    assert r["ok"] and r["g_y_train"] and r["g_y_eval"], r


def test_the_check_skips_a_dtype_the_backend_refuses(monkeypatch, capsys):
    """As Triton refuses fp64: a line saying so per case, the others checked; nothing run is a failure.
    The check takes the kernel from the kernel table, which loads it again after a reset."""
    from plif import kernel_table
    from plif.kernels import block_check

    cases = [BlockCase((2, 1, 2, 4, 4), dtype=d) for d in ("float32", "float64", "bfloat16")]
    monkeypatch.setattr(block_check, "block_grid", lambda quick=False: cases)
    try:
        monkeypatch.setattr(cb, "cpu_block_supports", lambda device, dtype: dtype != torch.float64)
        kernel_table.reset()
        assert block_check.main(["--backend", "cpu"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert [line.split()[0] for line in lines] == ["ok", "skip", "ok"]
        assert lines[1].endswith("(cpu does not take float64 on cpu)")
        monkeypatch.setattr(cb, "cpu_block_supports", lambda device, dtype: False)
        kernel_table.reset()
        assert block_check.main(["--backend", "cpu"]) == 1
        assert "no case ran: cpu takes none of the grid's dtypes on cpu" in capsys.readouterr().err
    finally:
        monkeypatch.undo()
        kernel_table.reset()


def test_a_missing_library_is_refused_with_the_reason(monkeypatch):
    """No library: the kernel names itself and the build's error, or says that it did not load
    when no error was kept (it used to print "None")."""
    from plif.kernels import cpu_build

    monkeypatch.setattr(cpu_build, "load_library", lambda: None)
    y = torch.ones(1, 1, 1, 2, 2)
    one, zero = torch.ones(1), torch.zeros(1)
    monkeypatch.setattr(cpu_build, "BUILD_ERROR", "g++ failed")
    with pytest.raises(RuntimeError, match="^the cpu block kernel is unavailable: g\\+\\+ failed$"):
        cb.block_forward_cpu(y, one, zero, one, None, NeuronConfig(), True)
    monkeypatch.setattr(cpu_build, "BUILD_ERROR", None)
    with pytest.raises(RuntimeError, match="^the cpu block kernel is unavailable: the library did not load$"):
        cb.block_forward_cpu(y, one, zero, one, None, NeuronConfig(), True)
