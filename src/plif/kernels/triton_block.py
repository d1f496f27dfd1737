"""The fused block after a convolution (BatchNorm → IF/LIF/PLIF over T → 2×2 spike max-pool) in Triton.

The contract, the shapes and the meaning of every argument are :mod:`.block_reference`'s; these
functions have its signatures (``cfg``: a :class:`~plif.neurons.functional.NeuronConfig`):

    block_forward_triton(y, scale, shift, k, v0, cfg, pool, need_state) -> (out, place, v_last)
    block_backward_triton(y, scale, shift, mean, k, v0, cfg, pool, place, g_out, g_v_last, need_k)
        -> (g_z, g_v0, g_k, sum_g, sum_gc)
    bn_input_grad_triton(g_z, y, mean, invstd, scale, sum_g, sum_gc, training) -> g_y
    block_stats_triton(y) -> (mean, var_biased)          per-channel BatchNorm statistics, one read of y

``y [T, B, C, H, W]`` is fp32, bf16 or fp16; state, math and every gradient are fp32 (the state
dtype).  fp64 is refused: Triton takes the float arguments (threshold, surrogate constants) as
fp32, so fp64 would not be the reference's fp64.  Each is a ``torch.library`` custom
operator (``plif::block_*``), so ``torch.compile(fullgraph=True)`` traces it; its fake
implementation is the launcher itself run on fake tensors (``triton_op``).

Forward (one kernel).  A program owns up to 256 windows of one ``(b, c)`` plane (1,024 pixels
without the pool), loops over ``t`` with the four neurons of each window in registers and writes
the pooled spike and its place.  On an odd plane the last row or column forms windows of their
own: their neurons run (``V_{T-1}``) and their spikes are dropped, as ``max_pool2d`` floors.
Bytes per element of ``y`` (fp32): read ``y`` 4, write the pooled spikes 1 and ``place`` 0.25
(4 + 4 without the pool), and ``V_{T-1}`` 4/T when asked.

Backward (one kernel).  BPTT needs ``H_t`` in reverse order, and nothing of the forward is kept.
A program owns 128 pixels of one plane, one a thread, and walks time in chunks of up to
:data:`~.triton_block_launch.MAX_CHUNK` steps: it recomputes a chunk forward from the potential
entering it, keeping the chunk's ``H_t`` and ``y_t`` in registers (the chunk is unrolled, so each
step's values are named registers, no scratch memory), then runs the chunk backwards.  The
potential entering each chunk but the first comes from a first forward sweep over ``T − chunk``
steps that stores it (fp32).  With ``T <= 20`` there is one chunk and no sweep: ``y`` is read once
(``T = 30``: 1.5 times).  ``∂out`` is routed through ``place``: a pixel compares its place in its
window with the stored one; the pixels no window covers get none.  ``∂k``'s factor, the drive
``z_t − (V_{t−1} − V_reset)``, is recomputed from ``y_t`` and ``H_{t−1}`` exactly as the forward
made it.  Bytes per element of ``y`` (fp32, one chunk): read ``y`` 4, ``∂out`` 1 and ``place``
0.25 (``∂out`` 4 without the pool), write ``g_z`` 4: 9.25 (12 without the pool); each further
chunk adds ``4·chunk/T`` of ``y`` and ``8/T`` of stored potential.  ``sum_g``, ``sum_gc`` and
``∂k`` are per-program partials in the state dtype, summed once afterwards in a fixed order:
deterministic, no atomics, no host synchronisation.  Unrolling costs compile time (seconds for a
20-step chunk) and registers (about 170 a thread at 20 steps, 110 at 10, by ``ptxas`` for sm_90).

BatchNorm's input gradient: one elementwise pass (read ``g_z`` 4 and ``y`` 4, write ``g_y`` 4), over
``g_z`` itself when ``y`` is fp32.
Statistics: one read of ``y``; per plane the sums of ``y − p`` and ``(y − p)²`` about the
channel's first value ``p`` (no cancellation between large means), combined in fp64 on the device.

Exactness (fp32 state, so for bf16 and fp16 ``y`` too).  ``z = y·scale + shift`` and ``H_t`` are rounded after each product and
sum, as PyTorch does: the products are ``mul.rn`` on the GPU (never contracted into an FMA, under
``torch.compile`` too) and eager launches turn contraction off.  So ``out``, ``place`` and
``V_{T-1}`` are bit-identical to the reference, and the backward's recomputed spikes are the
forward's.  ``g_z`` and ``∂V_{-1}`` equal the reference's to rounding of the chain rule's order
(a few ulp per step); the sums and ``∂k`` are sums in another order (relative ~1e-6).  The
statistics equal ``torch.var_mean`` to rounding.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from torch import Tensor
from torch.library import triton_op

from ..neurons.functional import NeuronConfig, rest_potential, state_dtype
from ..surrogate import get_surrogate
from .triton_block_launch import (backward_flags, backward_launch, chunk_steps, forward_flags, forward_launch,
                                  input_grad_flags, plane_launch, stats_flags)
from .triton_neuron import dv_dh, launch_kernel, spike_reset, surrogate_grad

__all__ = ["block_forward_triton", "block_backward_triton", "bn_input_grad_triton", "block_stats_triton",
           "block_triton_supports"]

_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


# ----------------------------------------------------------------------------------------- kernels
if os.environ.get("TRITON_INTERPRET") == "1":  # the interpreter has no inline assembly; numpy rounds each product
    @triton.jit
    def _mul_rn(a, b):
        return a * b
else:
    @triton.jit
    def _mul_rn(a, b):
        """``a·b`` rounded on its own: ``mul.rn`` is never contracted with a following add (whatever
        ``enable_fp_fusion`` says), and keeps denormals (libdevice's ``mul_rn`` flushes them)."""
        return tl.inline_asm_elementwise("mul.rn.f32 $0, $1, $2;", "=f,f,f", [a, b], dtype=tl.float32,
                                         is_pure=True, pack=1)


@triton.jit
def _neuron_step(x, v, scale, shift, k, v_th, v_reset, LEAK: tl.constexpr, HARD: tl.constexpr):
    """One step from the raw input ``x``: ``(z − (V_{t−1} − V_reset), H_t, S_t, V_t)``."""
    z = _mul_rn(x, scale) + shift  # BatchNorm as an affine
    drive = z - (v - v_reset)
    if LEAK:  # charge
        h = v + _mul_rn(k, drive)
    else:
        h = v + z
    spike = (h - v_th) >= 0.0  # fire
    return drive, h, spike, spike_reset(h, spike, v_th, v_reset, HARD)  # reset


@triton.jit
def _channel_constants(scale_ptr, shift_ptr, k_ptr, c, PER_CHANNEL: tl.constexpr):
    scale = tl.load(scale_ptr + c)
    shift = tl.load(shift_ptr + c)
    if PER_CHANNEL:
        k = tl.load(k_ptr + c).to(scale.dtype)
    else:
        k = tl.load(k_ptr).to(scale.dtype)
    return scale, shift, k


@triton.jit
def _block_forward_kernel(y_ptr, scale_ptr, shift_ptr, k_ptr, v_start_ptr, out_ptr, place_ptr, v_end_ptr,
                          T, C, H, W, HO, WO, N, NO, v_th, v_reset,
                          BLOCK: tl.constexpr, POOL: tl.constexpr, LEAK: tl.constexpr, HARD: tl.constexpr,
                          PER_CHANNEL: tl.constexpr, HAS_V0: tl.constexpr, NEED_STATE: tl.constexpr):
    acc = scale_ptr.dtype.element_ty
    # Inductor passes Python floats as fp64 scalars: the state's type here, or they would widen it
    v_th = tl.cast(v_th, acc)
    v_reset = tl.cast(v_reset, acc)
    plane = tl.program_id(0)
    scale, shift, k = _channel_constants(scale_ptr, shift_ptr, k_ptr, plane % C, PER_CHANNEL)
    base = plane.to(tl.int64) * H * W
    unit = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    step = tl.zeros([], tl.int64)
    if POOL:  # [BLOCK, 2]: a window's two columns, adjacent in memory (a warp reads 128 contiguous bytes)
        wn = (W + 1) // 2
        live = unit < ((H + 1) // 2) * wn
        wr = unit // wn
        wc = unit % wn
        col = 2 * wc[:, None] + tl.arange(0, 2)[None, :]
        top = live[:, None] & (col < W)
        bottom = top & (2 * wr + 1 < H)[:, None]
        n_top = base + (2 * wr * W)[:, None] + col
        pooled = live & (wr < HO) & (wc < WO)
        p_off = plane.to(tl.int64) * HO * WO + wr * WO + wc
        if HAS_V0:
            v_top = tl.load(v_start_ptr + n_top, mask=top, other=0.0)
            v_bottom = tl.load(v_start_ptr + n_top + W, mask=bottom, other=0.0)
        else:
            v_top = tl.zeros([BLOCK, 2], acc) + v_reset
            v_bottom = v_top
        p_step = tl.zeros([], tl.int64)
        for t in range(T):
            x_top = tl.load(y_ptr + step + n_top, mask=top, other=0.0).to(acc)
            x_bottom = tl.load(y_ptr + step + n_top + W, mask=bottom, other=0.0).to(acc)
            _, _, s_top, v_top = _neuron_step(x_top, v_top, scale, shift, k, v_th, v_reset, LEAK, HARD)
            _, _, s_bottom, v_bottom = _neuron_step(x_bottom, v_bottom, scale, shift, k, v_th, v_reset, LEAK, HARD)
            s00, s01 = tl.split(s_top)
            s10, s11 = tl.split(s_bottom)
            # max_pool2d's choice: the first 1 row by row, else the window's first element
            place = tl.where(s00, 0, tl.where(s01, 1, tl.where(s10, 2, tl.where(s11, 3, 0))))
            spike = s00 | s01 | s10 | s11
            tl.store(out_ptr + p_step + p_off, tl.where(spike, 1.0, 0.0).to(out_ptr.dtype.element_ty), mask=pooled)
            tl.store(place_ptr + p_step + p_off, place.to(tl.uint8), mask=pooled)
            step += N
            p_step += NO
        if NEED_STATE:
            tl.store(v_end_ptr + n_top, v_top, mask=top)
            tl.store(v_end_ptr + n_top + W, v_bottom, mask=bottom)
    else:
        live = unit < H * W
        n = base + unit
        if HAS_V0:
            v = tl.load(v_start_ptr + n, mask=live, other=0.0)
        else:
            v = tl.zeros([BLOCK], acc) + v_reset
        for t in range(T):
            x = tl.load(y_ptr + step + n, mask=live, other=0.0).to(acc)
            _, _, spike, v = _neuron_step(x, v, scale, shift, k, v_th, v_reset, LEAK, HARD)
            tl.store(out_ptr + step + n, tl.where(spike, 1.0, 0.0).to(out_ptr.dtype.element_ty), mask=live)
            step += N
        if NEED_STATE:
            tl.store(v_end_ptr + n, v, mask=live)


@triton.jit
def _block_backward_kernel(y_ptr, scale_ptr, shift_ptr, mean_ptr, k_ptr, v_start_ptr, place_ptr, g_out_ptr,
                           g_end_ptr, g_z_ptr, g_start_ptr, ckpt_ptr, part_ptr,
                           T, C, H, W, HO, WO, N, NO, v_th, v_reset, sg_a, sg_b,
                           BLOCK: tl.constexpr, CHUNK: tl.constexpr, POOL: tl.constexpr,
                           LEAK: tl.constexpr, HARD: tl.constexpr, DETACH: tl.constexpr, SG: tl.constexpr,
                           PER_CHANNEL: tl.constexpr, HAS_V0: tl.constexpr, HAS_GV: tl.constexpr,
                           NEED_K: tl.constexpr):
    acc = scale_ptr.dtype.element_ty
    # Inductor passes Python floats as fp64 scalars: the state's type here, or they would widen ∂V and ∂k
    v_th = tl.cast(v_th, acc)
    v_reset = tl.cast(v_reset, acc)
    sg_a = tl.cast(sg_a, acc)
    sg_b = tl.cast(sg_b, acc)
    plane = tl.program_id(0)
    c = plane % C
    scale, shift, k = _channel_constants(scale_ptr, shift_ptr, k_ptr, c, PER_CHANNEL)
    mean = tl.load(mean_ptr + c)
    pix = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    live = pix < H * W
    n = plane.to(tl.int64) * H * W + pix
    if POOL:
        row = pix // W
        col = pix % W
        routed = live & (row < 2 * HO) & (col < 2 * WO)
        p_off = plane.to(tl.int64) * HO * WO + (row // 2) * WO + col // 2
        mine = (row % 2) * 2 + col % 2
    if HAS_V0:
        v0 = tl.load(v_start_ptr + n, mask=live, other=0.0)
    else:
        v0 = tl.zeros([BLOCK], acc) + v_reset
    chunks = tl.cdiv(T, CHUNK)
    # the potential entering every chunk but the first, from one sweep forward
    v = v0
    step = tl.zeros([], tl.int64)
    slot = tl.zeros([], tl.int64)
    for sweep in range(chunks - 1):
        for i in tl.static_range(CHUNK):  # unrolled: the chunk's loads are in flight together
            x = tl.load(y_ptr + step + n, mask=live, other=0.0).to(acc)
            _, _, _, v = _neuron_step(x, v, scale, shift, k, v_th, v_reset, LEAK, HARD)
            step += N
        tl.store(ckpt_ptr + slot + n, v, mask=live)
        slot += N
    g_v = tl.zeros([BLOCK], acc)
    if HAS_GV:
        g_v = tl.load(g_end_ptr + n, mask=live, other=0.0)
    sum_g = tl.zeros([BLOCK], acc)
    sum_gc = tl.zeros([BLOCK], acc)
    sum_k = tl.zeros([BLOCK], acc)
    for jj in range(chunks):
        j = (chunks - 1 - jj).to(tl.int64)
        t0 = j * CHUNK
        # masked (live and j > 0), not only chosen: tl.where loads either way, and with one chunk ckpt
        # is a one-element stand-in that offset n would overrun by up to B·C·H·W elements
        stored = tl.load(ckpt_ptr + tl.maximum(j - 1, 0) * N + n, mask=pix < tl.where(j > 0, H * W, 0), other=0.0)
        v_in = tl.where(j > 0, stored, v0)
        v = v_in
        hs = ()  # the chunk's H_t and y_t in registers (unrolled: every index is a constant)
        xs = ()
        step = t0 * N
        for i in tl.static_range(CHUNK):  # the chunk forward again
            x = tl.load(y_ptr + step + n, mask=pix < tl.where(t0 + i < T, H * W, 0), other=0.0).to(acc)
            _, h, _, v = _neuron_step(x, v, scale, shift, k, v_th, v_reset, LEAK, HARD)
            hs = hs + (h,)
            xs = xs + (x,)
            step += N
        for ii in tl.static_range(CHUNK):  # and backwards
            t = t0 + (CHUNK - 1 - ii)
            now = pix < tl.where(t < T, H * W, 0)  # live and t < T
            step -= N
            h = hs[CHUNK - 1 - ii]
            x = xs[CHUNK - 1 - ii]
            if POOL:
                g = tl.load(g_out_ptr + t * NO + p_off, mask=now & routed, other=0.0).to(acc)
                chosen = tl.load(place_ptr + t * NO + p_off, mask=now & routed, other=0)
                g_s = tl.where(chosen.to(tl.int32) == mine, g, 0.0)
            else:
                g_s = tl.load(g_out_ptr + step + n, mask=now, other=0.0).to(acc)
            sg = surrogate_grad(h - v_th, sg_a, sg_b, SG)
            g_h = g_s * sg + g_v * dv_dh(h, sg, v_th, v_reset, HARD, DETACH)
            if LEAK:
                g_z = g_h * k
                g_prev = g_h * (1.0 - k)
            else:
                g_z = g_h
                g_prev = g_h
            tl.store(g_z_ptr + step + n, g_z, mask=now)
            g_z = tl.where(now, g_z, 0.0)
            sum_g += g_z
            sum_gc += g_z * (x - mean)
            if LEAK and NEED_K:  # ∂H_t/∂k, the drive, recomputed exactly as the forward made it
                if ii == CHUNK - 1:
                    v_prev = v_in
                else:
                    h_prev = hs[CHUNK - 2 - ii]
                    v_prev = spike_reset(h_prev, (h_prev - v_th) >= 0.0, v_th, v_reset, HARD)
                drive, _, _, _ = _neuron_step(x, v_prev, scale, shift, k, v_th, v_reset, LEAK, HARD)
                sum_k += tl.where(now, g_h * drive, 0.0)
            g_v = tl.where(t < T, g_prev, g_v)
    tl.store(g_start_ptr + n, g_v, mask=live)
    programs = tl.num_programs(0) * tl.num_programs(1)
    q = plane * tl.num_programs(1) + tl.program_id(1)
    tl.store(part_ptr + q, tl.sum(sum_g))
    tl.store(part_ptr + programs + q, tl.sum(sum_gc))
    if LEAK and NEED_K:
        tl.store(part_ptr + 2 * programs + q, tl.sum(sum_k))


@triton.jit
def _bn_input_grad_kernel(g_z_ptr, y_ptr, mean_ptr, invstd_ptr, scale_ptr, sum_g_ptr, sum_gc_ptr, g_y_ptr,
                          C, HW, count,
                          BLOCK: tl.constexpr, TRAINING: tl.constexpr):
    plane = tl.program_id(0)
    c = plane % C
    pix = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    live = pix < HW
    n = plane.to(tl.int64) * HW + pix
    scale = tl.load(scale_ptr + c)
    g = tl.load(g_z_ptr + n, mask=live, other=0.0)
    if TRAINING:
        acc = scale.dtype
        count = tl.cast(count, acc)
        invstd = tl.load(invstd_ptr + c)
        per_mean = tl.load(sum_g_ptr + c) / count
        per_centred = invstd * invstd * tl.load(sum_gc_ptr + c) / count
        centred = tl.load(y_ptr + n, mask=live, other=0.0).to(acc) - tl.load(mean_ptr + c)
        g = g - per_mean - centred * per_centred
    tl.store(g_y_ptr + n, (g * scale).to(g_y_ptr.dtype.element_ty), mask=live)


@triton.jit
def _block_stats_kernel(y_ptr, pivot_ptr, part_ptr, C, HW, BLOCK: tl.constexpr):
    acc = part_ptr.dtype.element_ty
    c = tl.program_id(0)
    plane = tl.program_id(1) * C + c  # (t, b) plane of channel c
    pivot = tl.load(pivot_ptr + c)
    base = plane.to(tl.int64) * HW
    s = tl.zeros([BLOCK], acc)
    q = tl.zeros([BLOCK], acc)
    for start in range(0, HW, BLOCK):
        pix = start + tl.arange(0, BLOCK)
        live = pix < HW
        d = tl.where(live, tl.load(y_ptr + base + pix, mask=live, other=0.0).to(acc) - pivot, 0.0)
        s += d
        q += d * d
    slot = c * tl.num_programs(1) + tl.program_id(1)
    tl.store(part_ptr + slot, tl.sum(s))
    tl.store(part_ptr + C * tl.num_programs(1) + slot, tl.sum(q))


# ------------------------------------------------------------------------------------ operators
def _check_y(y: Tensor, where: str) -> None:
    if y.dim() != 5:
        raise ValueError(f"{where}: y must be [T, B, C, H, W], got shape {tuple(y.shape)}")
    if y.dtype not in _DTYPES:
        raise ValueError(f"{where}: y's dtype {y.dtype} is not one of fp32, bf16, fp16 (fp64: the reference; "
                         "the kernels take their float arguments in fp32)")


def _check_shapes(where: str, y: Tensor, pool: bool = False, channel: dict | None = None, k: Tensor | None = None,
                  step: dict | None = None, pooled: dict | None = None, full: dict | None = None) -> None:
    """A kernel indexes its arguments by ``y``'s shape: refuse any other shape, naming it."""
    T, B, C, H, W = y.shape
    expect = {"channel": (C,), "step": (B, C, H, W), "pooled": (T, B, C, H // 2, W // 2) if pool else tuple(y.shape),
              "full": tuple(y.shape)}
    for kind, tensors in (("channel", channel), ("step", step), ("pooled", pooled), ("full", full)):
        for name, t in (tensors or {}).items():
            if t is not None and tuple(t.shape) != expect[kind]:
                raise ValueError(f"{where}: {name} must have shape {list(expect[kind])} for y of shape "
                                 f"{list(y.shape)}{' with the pool' if kind == 'pooled' and pool else ''}, "
                                 f"got {list(t.shape)}")
    if k is not None and k.numel() not in (1, C):
        raise ValueError(f"{where}: k must hold one value or one per channel ({C}), got shape {list(k.shape)}")


def _state(t: Tensor | None, acc: torch.dtype) -> Tensor | None:
    return None if t is None else t.to(acc).contiguous()


def _unused(dtype: torch.dtype, device) -> Tensor:
    """An argument the flags keep the kernel from touching (one element: never a null pointer), of
    the type the lowering check gives it."""
    return torch.empty(1, dtype=dtype, device=device)


@triton_op("plif::block_forward", mutates_args=())
def _block_forward_op(y: Tensor, scale: Tensor, shift: Tensor, k: Tensor, v0: Tensor | None, leak: bool,
                      hard: bool, v_th: float, v_rest: float, pool: bool,
                      need_state: bool) -> tuple[Tensor, Tensor, Tensor]:
    acc = state_dtype(y.dtype)
    y = y.contiguous()
    T, B, C, H, W = y.shape
    HO, WO = (H // 2, W // 2) if pool else (H, W)
    scale, shift, k, v0 = _state(scale, acc), _state(shift, acc), _state(k, acc), _state(v0, acc)
    out = torch.empty((T, B, C, HO, WO), dtype=y.dtype, device=y.device)
    place = torch.empty((T, B, C, HO, WO) if pool else (0,), dtype=torch.uint8, device=y.device)
    v_last = torch.empty((B, C, H, W) if need_state else (0,), dtype=acc, device=y.device)
    if y.numel() == 0:
        return out, place, v_last
    launch = forward_launch(H, W, pool)
    units = ((H + 1) // 2) * ((W + 1) // 2) if pool else H * W
    flags = forward_flags(pool, leak, hard, k.numel() > 1, v0 is not None, need_state, launch.block)
    launch_kernel(_block_forward_kernel, (B * C, triton.cdiv(units, launch.block)),
            y, scale, shift, k, _unused(acc, y.device) if v0 is None else v0, out,
            place if pool else _unused(torch.uint8, y.device), v_last if need_state else _unused(acc, y.device),
            T, C, H, W, HO, WO, B * C * H * W, B * C * HO * WO, v_th, v_rest, **flags, num_warps=launch.num_warps)
    return out, place, v_last


@triton_op("plif::block_backward", mutates_args=())
def _block_backward_op(y: Tensor, scale: Tensor, shift: Tensor, mean: Tensor, k: Tensor, v0: Tensor | None,
                       place: Tensor, g_out: Tensor, g_v_last: Tensor | None, leak: bool, hard: bool, detach: bool,
                       sg_code: int, sg_a: float, sg_b: float, v_th: float, v_rest: float, pool: bool,
                       need_k: bool) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    acc = state_dtype(y.dtype)
    y, place, g_out = y.contiguous(), place.contiguous(), g_out.contiguous()
    T, B, C, H, W = y.shape
    HO, WO = (H // 2, W // 2) if pool else (H, W)
    scale, shift, mean, k = _state(scale, acc), _state(shift, acc), _state(mean, acc), _state(k, acc)
    v0, g_v_last = _state(v0, acc), _state(g_v_last, acc)
    need_k = need_k and leak
    g_z = torch.empty(y.shape, dtype=acc, device=y.device)
    g_v0 = torch.empty((B, C, H, W), dtype=acc, device=y.device)
    launch = backward_launch(H, W)
    chunk = chunk_steps(max(T, 1))
    blocks = triton.cdiv(H * W, launch.block)
    parts = torch.zeros((3, B, C, blocks), dtype=acc, device=y.device)
    if y.numel() > 0:
        chunks = triton.cdiv(T, chunk)  # the potential entering each chunk but the first
        ckpt = (torch.empty((chunks - 1, B, C, H, W), dtype=acc, device=y.device) if chunks > 1
                else _unused(acc, y.device))
        flags = backward_flags(pool, leak, hard, detach, sg_code, k.numel() > 1, v0 is not None,
                               g_v_last is not None, need_k, chunk, launch.block)
        launch_kernel(_block_backward_kernel, (B * C, blocks),
                y, scale, shift, mean, k, g_v0 if v0 is None else v0, place if pool else _unused(torch.uint8, y.device),
                g_out,
                g_v0 if g_v_last is None else g_v_last, g_z, g_v0, ckpt, parts,
                T, C, H, W, HO, WO, B * C * H * W, B * C * HO * WO, v_th, v_rest, sg_a, sg_b,
                **flags, num_warps=launch.num_warps)
    else:
        g_z.zero_()
        g_v0.zero_()
    sums = parts.sum(dim=(1, 3))  # [3, C], in one fixed order
    g_k = (sums[2] if k.numel() > 1 else sums[2].sum().reshape(k.shape)).clone()
    return g_z, g_v0, g_k, sums[0].clone(), sums[1].clone()


def _bn_input_grad_into(g_y: Tensor, g_z: Tensor, y: Tensor, mean: Tensor, invstd: Tensor, scale: Tensor,
                        sum_g: Tensor, sum_gc: Tensor, training: bool) -> None:
    """One elementwise pass; ``g_y`` may be ``g_z`` itself (one thread reads an element, then writes it)."""
    acc = g_z.dtype
    T, B, C, H, W = y.shape
    mean, invstd, scale = _state(mean, acc), _state(invstd, acc), _state(scale, acc)
    sum_g, sum_gc = _state(sum_g, acc), _state(sum_gc, acc)
    if y.numel() > 0:
        launch = plane_launch(H, W)
        launch_kernel(_bn_input_grad_kernel, (T * B * C, triton.cdiv(H * W, launch.block)),
                g_z, y, mean, invstd, scale, sum_g, sum_gc, g_y, C, H * W, T * B * H * W,
                **input_grad_flags(training, launch.block), num_warps=launch.num_warps)


@triton_op("plif::bn_input_grad", mutates_args=())
def _bn_input_grad_op(g_z: Tensor, y: Tensor, mean: Tensor, invstd: Tensor, scale: Tensor, sum_g: Tensor,
                      sum_gc: Tensor, training: bool) -> Tensor:
    y = y.contiguous()
    g_y = torch.empty(y.shape, dtype=y.dtype, device=y.device)
    _bn_input_grad_into(g_y, g_z.contiguous(), y, mean, invstd, scale, sum_g, sum_gc, training)
    return g_y


@triton_op("plif::bn_input_grad_", mutates_args=("g_z",))
def _bn_input_grad_inplace_op(g_z: Tensor, y: Tensor, mean: Tensor, invstd: Tensor, scale: Tensor, sum_g: Tensor,
                              sum_gc: Tensor, training: bool) -> None:
    _bn_input_grad_into(g_z, g_z, y.contiguous(), mean, invstd, scale, sum_g, sum_gc, training)


@triton_op("plif::block_stats", mutates_args=())
def _block_stats_op(y: Tensor) -> tuple[Tensor, Tensor]:
    acc = state_dtype(y.dtype)
    y = y.contiguous()
    T, B, C, H, W = y.shape
    pivot = y[0, 0, :, 0, 0].to(acc).contiguous()
    parts = torch.empty((2, C, T * B), dtype=acc, device=y.device)
    launch = plane_launch(H, W)
    launch_kernel(_block_stats_kernel, (C, T * B), y, pivot, parts, C, H * W, **stats_flags(launch.block),
            num_warps=launch.num_warps)
    sums = parts.to(torch.float64).sum(dim=2)  # [2, C]
    count = T * B * H * W
    shift = sums[0] / count
    var = (sums[1] / count - shift * shift).clamp_min(0.0)
    return (pivot.to(torch.float64) + shift).to(acc), var.to(acc)


# ---------------------------------------------------------------------------------- public functions
def block_forward_triton(y: Tensor, scale: Tensor, shift: Tensor, k: Tensor, v0: Tensor | None,
                         cfg: NeuronConfig, pool: bool, need_state: bool = False):
    """``(out, place, v_last)`` of :func:`~.block_reference.block_forward_reference`, on the GPU."""
    _check_y(y, "block_forward_triton")
    _check_shapes("block_forward_triton", y, channel={"scale": scale, "shift": shift}, k=k, step={"v0": v0})
    return _block_forward_op(y, scale, shift, k, v0, cfg.leak, cfg.hard_reset, float(cfg.v_threshold),
                             float(rest_potential(cfg)), bool(pool), bool(need_state))


def block_backward_triton(y: Tensor, scale: Tensor, shift: Tensor, mean: Tensor, k: Tensor, v0: Tensor | None,
                          cfg: NeuronConfig, pool: bool, place: Tensor, g_out: Tensor, g_v_last: Tensor | None,
                          need_k: bool = True):
    """``(g_z, g_v0, g_k, sum_g, sum_gc)`` of :func:`~.block_reference.block_backward_reference`.
    ``g_v0`` is ``∂L/∂V_{-1}`` whether ``v0`` was given or not."""
    _check_y(y, "block_backward_triton")
    _check_shapes("block_backward_triton", y, pool, {"scale": scale, "shift": shift, "mean": mean}, k,
                  {"v0": v0, "g_v_last": g_v_last}, {"g_out": g_out, "place": place if pool else None})
    sg = get_surrogate(cfg.surrogate)
    if not sg.fused:
        raise ValueError(f"block_backward_triton: surrogate {cfg.surrogate!r} has no closed form in the fused "
                         "kernels (register it with closed_form=...)")
    sg_a, sg_b = sg.kernel_constants(float(cfg.alpha))
    return _block_backward_op(y, scale, shift, mean, k, v0, place, g_out, g_v_last, cfg.leak, cfg.hard_reset,
                              cfg.detach_reset, sg.code, sg_a, sg_b, float(cfg.v_threshold),
                              float(rest_potential(cfg)), bool(pool), bool(need_k))


def bn_input_grad_triton(g_z: Tensor, y: Tensor, mean: Tensor, invstd: Tensor, scale: Tensor, sum_g: Tensor,
                         sum_gc: Tensor, training: bool) -> Tensor:
    """``∂L/∂y [T, B, C, H, W]`` in ``y``'s dtype, as :func:`~.block_reference.bn_input_grad`.  When
    ``g_z`` is contiguous and of ``y``'s dtype (fp32 ``y``), ``∂L/∂y`` is written over ``g_z``, which is
    returned: one ``y``-sized buffer less (the contract lets this function reuse ``g_z``)."""
    _check_y(y, "bn_input_grad_triton")
    _check_shapes("bn_input_grad_triton", y, channel={"mean": mean, "invstd": invstd, "scale": scale, "sum_g": sum_g,
                                                      "sum_gc": sum_gc}, full={"g_z": g_z})
    # traced (torch.compile): g_z is block_backward's own (contiguous) output; Dynamo cannot ask a
    # tensor's layout in a backward it speculates (cpu_block.bn_input_grad_cpu_ says more)
    if g_z.dtype == y.dtype and (torch.compiler.is_compiling() or g_z.is_contiguous()):
        _bn_input_grad_inplace_op(g_z, y, mean, invstd, scale, sum_g, sum_gc, bool(training))
        return g_z
    return _bn_input_grad_op(g_z, y, mean, invstd, scale, sum_g, sum_gc, bool(training))


def block_stats_triton(y: Tensor) -> tuple[Tensor, Tensor]:
    """Per-channel ``(mean, biased variance) [C]`` of ``y [T, B, C, H, W]`` over ``T·B·H·W`` (state dtype)."""
    _check_y(y, "block_stats_triton")
    if y.shape[0] * y.shape[1] * y.shape[3] * y.shape[4] == 0:
        raise ValueError(f"block_stats_triton: no values per channel in y of shape {tuple(y.shape)}")
    return _block_stats_op(y)


def block_triton_supports(device: torch.device | str, dtype: torch.dtype) -> bool:
    """Whether these kernels take a ``y`` of this device and dtype: CUDA (or the CPU under
    ``TRITON_INTERPRET=1``) in fp32, bf16 or fp16 (not fp64: see the module docstring)."""
    kind = torch.device(device).type
    return (kind == "cuda" or (kind == "cpu" and os.environ.get("TRITON_INTERPRET") == "1")) and dtype in _DTYPES
