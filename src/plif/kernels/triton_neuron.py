"""Fused multi-step IF/LIF/PLIF in Triton: one kernel for all T steps forward, one backward.

Each program owns a block of neurons of one ``k`` channel and loops over ``t`` with the membrane
potential in registers, so ``X`` is read once, ``S`` and ``H`` written once.  Only ``H_t`` is kept
for backward (fp32, or bf16 to halve the bytes): spikes and ``V_{t-1}`` are recomputed from it.
The backward is the closed-form recursion of :mod:`plif.neurons.bptt`; ``∂L/∂k`` is reduced per
block in fp32 into a ``[C, blocks]`` buffer and summed once on the device: deterministic, no
atomics, no host synchronisation (so it can be captured in a CUDA graph).

Variants (leak, hard/soft reset, detached reset, surrogate, per-channel ``k``) are
``tl.constexpr`` flags.  State and accumulation are fp32 whatever the input dtype.  Floating
point contraction is switched off so that ``H_t`` is bit-identical to the PyTorch reference in
fp32, which makes the spikes identical too.
"""
from __future__ import annotations


import torch
import triton
import triton.language as tl

from ..neurons.functional import NeuronConfig, rest_potential
from ..surrogate import get_surrogate
from .layout import KLayout, flat_k, fold_k_grad, k_layout

__all__ = ["multi_step_triton", "triton_supports"]

_MAX_BLOCK = 1024


# ----------------------------------------------------------------------------------------- kernels
@triton.jit
def _surrogate_grad(u, sg_a, sg_b, SG: tl.constexpr):
    """σ'(u) for surrogate ``code`` SG; ``sg_a``/``sg_b`` are constants folded on the host."""
    if SG == 0:  # atan: (α/2) / (1 + (π/2·α·u)²); sg_a = α/2, sg_b = π/2·α
        z = sg_b * u
        return sg_a / (1.0 + z * z)
    elif SG == 1:  # sigmoid: α s (1 - s), s = sigmoid(α u); sg_a = α
        s = tl.sigmoid(sg_a * u)
        return sg_a * s * (1.0 - s)
    elif SG == 2:  # rect: α/2 where |u| < 1/α; sg_a = α/2, sg_b = 1/α
        return tl.where(tl.abs(u) < sg_b, sg_a, 0.0)
    else:  # triangle: max(0, α - α²|u|); sg_a = α, sg_b = α²
        return tl.maximum(sg_a - sg_b * tl.abs(u), 0.0)


@triton.jit
def _reset(h, spike, v_th, v_reset, HARD: tl.constexpr):
    """``V_t`` from ``H_t``; ``where`` equals ``H(1-S) + V_reset S`` exactly for S in {0, 1}."""
    if HARD:
        return tl.where(spike, v_reset, h)
    else:
        return tl.where(spike, h - v_th, h)


@triton.jit
def _neuron_offsets(M, INNER, C, BLOCK: tl.constexpr, PER_CHANNEL: tl.constexpr):
    """Flat offsets (within one step) of this program's neurons, and their mask."""
    c = tl.program_id(0)
    m = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = m < M
    if PER_CHANNEL:
        offs = (m // INNER) * (C * INNER) + c * INNER + (m % INNER)
    else:
        offs = m
    return offs, mask


@triton.jit
def _forward_kernel(x_ptr, k_ptr, v0_ptr, s_ptr, h_ptr, v_last_ptr,
                    T, N, M, INNER, C, v_th, v_reset,
                    BLOCK: tl.constexpr, LEAK: tl.constexpr, HARD: tl.constexpr,
                    PER_CHANNEL: tl.constexpr):
    offs, mask = _neuron_offsets(M, INNER, C, BLOCK, PER_CHANNEL)
    v = tl.load(v0_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if LEAK:
        k = tl.load(k_ptr + tl.program_id(0)).to(tl.float32)
    step = offs.to(tl.int64)
    for _ in range(T):
        x = tl.load(x_ptr + step, mask=mask, other=0.0).to(tl.float32)
        if LEAK:  # charge
            h = v + k * (x - (v - v_reset))
        else:
            h = v + x
        spike = (h - v_th) >= 0.0  # fire
        v = _reset(h, spike, v_th, v_reset, HARD)  # reset
        tl.store(s_ptr + step, tl.where(spike, 1.0, 0.0).to(s_ptr.dtype.element_ty), mask=mask)
        tl.store(h_ptr + step, h.to(h_ptr.dtype.element_ty), mask=mask)
        step += N
    tl.store(v_last_ptr + offs, v.to(v_last_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _backward_kernel(g_s_ptr, g_v_last_ptr, h_ptr, v0_ptr, k_ptr, g_x_ptr, g_v0_ptr, g_k_part_ptr,
                     T, N, LAST, M, INNER, C, v_th, v_reset, sg_a, sg_b,
                     BLOCK: tl.constexpr, LEAK: tl.constexpr, HARD: tl.constexpr,
                     DETACH: tl.constexpr, SG: tl.constexpr, PER_CHANNEL: tl.constexpr,
                     NEED_K: tl.constexpr):
    offs, mask = _neuron_offsets(M, INNER, C, BLOCK, PER_CHANNEL)
    g_v = tl.load(g_v_last_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    v0 = tl.load(v0_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if LEAK:
        k = tl.load(k_ptr + tl.program_id(0)).to(tl.float32)
    g_k = tl.zeros([BLOCK], dtype=tl.float32)
    step = offs.to(tl.int64) + LAST  # LAST = (T - 1) N, passed as a 64-bit-safe host integer
    h = tl.load(h_ptr + step, mask=mask, other=0.0).to(tl.float32)
    for _ in range(T):
        # H_{t-1} is both V_{t-1}'s source (for ∂k) and next iteration's H_t: one load per step
        has_prev = step >= N  # i.e. t > 0, since step = t N + offs with offs < N
        h_prev = tl.load(h_ptr + step - N, mask=mask & has_prev, other=0.0).to(tl.float32)
        u = h - v_th
        spike = u >= 0.0
        sg = _surrogate_grad(u, sg_a, sg_b, SG)
        if HARD:
            dv_dh = tl.where(spike, 0.0, 1.0)
            if not DETACH:
                dv_dh += (v_reset - h) * sg
        else:
            dv_dh = tl.full([BLOCK], 1.0, tl.float32)
            if not DETACH:
                dv_dh -= v_th * sg
        g_h = tl.load(g_s_ptr + step, mask=mask, other=0.0).to(tl.float32) * sg + g_v * dv_dh
        if LEAK:
            tl.store(g_x_ptr + step, (g_h * k).to(g_x_ptr.dtype.element_ty), mask=mask)
            if NEED_K:
                v_prev = tl.where(has_prev, _reset(h_prev, (h_prev - v_th) >= 0.0, v_th, v_reset, HARD), v0)
                g_k += g_h * ((h - v_prev) / k)
            g_v = g_h * (1.0 - k)
        else:
            tl.store(g_x_ptr + step, g_h.to(g_x_ptr.dtype.element_ty), mask=mask)
            g_v = g_h
        h = h_prev
        step -= N
    tl.store(g_v0_ptr + offs, g_v.to(g_v0_ptr.dtype.element_ty), mask=mask)
    if NEED_K:
        part = tl.sum(tl.where(mask, g_k, 0.0), axis=0)
        tl.store(g_k_part_ptr + tl.program_id(0) * tl.num_programs(1) + tl.program_id(1), part)


# --------------------------------------------------------------------------------------- launchers
def _block_size(m: int) -> int:
    return max(16, min(_MAX_BLOCK, triton.next_power_of_2(m)))


def _grid(layout: KLayout, block: int):
    m = layout.outer * layout.inner
    return (layout.channels, triton.cdiv(m, block)), m


def _launch_forward(x, k_flat, v0, cfg: NeuronConfig, layout: KLayout, h_dtype):
    T, n = x.shape[0], v0.numel()
    spikes = torch.empty_like(x)
    h_seq = torch.empty(x.shape, dtype=h_dtype, device=x.device)
    v_last = torch.empty_like(v0)
    block = _block_size(layout.outer * layout.inner)
    grid, m = _grid(layout, block)
    _forward_kernel[grid](
        x, k_flat, v0, spikes, h_seq, v_last, T, n, m, layout.inner, layout.channels,
        float(cfg.v_threshold), float(rest_potential(cfg)),
        BLOCK=block, LEAK=cfg.leak, HARD=cfg.hard_reset, PER_CHANNEL=layout.per_channel,
        num_warps=4, enable_fp_fusion=False)
    return spikes, h_seq, v_last


def _launch_backward(g_s, g_v_last, h_seq, v0, k_flat, cfg: NeuronConfig, layout: KLayout, x_dtype, need_k):
    T, n = h_seq.shape[0], v0.numel()
    g_x = torch.empty(h_seq.shape, dtype=x_dtype, device=h_seq.device)
    g_v0 = torch.empty_like(v0)
    block = _block_size(layout.outer * layout.inner)
    grid, m = _grid(layout, block)
    g_k_part = torch.empty(grid if need_k else (1,), dtype=torch.float32, device=h_seq.device)
    sg = get_surrogate(cfg.surrogate)
    code, (sg_a, sg_b) = sg.code, sg.kernel_constants(float(cfg.alpha))
    _backward_kernel[grid](
        g_s, g_v_last, h_seq, v0, k_flat, g_x, g_v0, g_k_part, T, n, (T - 1) * n, m, layout.inner, layout.channels,
        float(cfg.v_threshold), float(rest_potential(cfg)), sg_a, sg_b,
        BLOCK=block, LEAK=cfg.leak, HARD=cfg.hard_reset, DETACH=cfg.detach_reset, SG=code,
        PER_CHANNEL=layout.per_channel, NEED_K=need_k, num_warps=4, enable_fp_fusion=False)
    return g_x, g_v0, (g_k_part.sum(dim=1) if need_k else None)


# ----------------------------------------------------------------------------------- autograd glue
class _MultiStepTriton(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k, v0, cfg: NeuronConfig, h_dtype):
        x, v0 = x.contiguous(), v0.contiguous()
        step_shape = tuple(x.shape[1:])
        layout = k_layout(tuple(k.shape), step_shape)
        k_flat = flat_k(k, step_shape, layout) if cfg.leak else v0  # IF: unused, any saved tensor will do
        spikes, h_seq, v_last = _launch_forward(x, k_flat, v0, cfg, layout, h_dtype)
        ctx.save_for_backward(h_seq, v0, k_flat, k)
        ctx.cfg, ctx.layout, ctx.x_dtype, ctx.step_shape = cfg, layout, x.dtype, step_shape
        return spikes, v_last

    @staticmethod
    def backward(ctx, g_s, g_v_last):
        h_seq, v0, k_flat, k = ctx.saved_tensors
        need_k = bool(ctx.needs_input_grad[1] and ctx.cfg.leak)
        g_x, g_v0, g_k = _launch_backward(g_s.contiguous(), g_v_last.contiguous(), h_seq, v0, k_flat,
                                          ctx.cfg, ctx.layout, ctx.x_dtype, need_k)
        if need_k:
            g_k = fold_k_grad(g_k, k, ctx.step_shape, ctx.layout)
        return g_x, g_k, (g_v0 if ctx.needs_input_grad[2] else None), None, None


# ---------------------------------------------------------------------------------- public function
def multi_step_triton(x: torch.Tensor, k: torch.Tensor, v0: torch.Tensor, cfg: NeuronConfig,
                      h_dtype: torch.dtype = torch.float32):
    """Fused ``x [T, B, ...]`` -> ``(spikes [T, B, ...], V_{T-1} [B, ...])`` on the GPU.

    ``k`` is a tensor broadcastable to ``x[0]`` (0-d per layer, ``[C, 1, 1]`` per channel; ignored
    for IF), ``v0`` a full ``[B, ...]`` state.  ``x`` may be fp32, bf16 or fp16: the potential is
    kept in fp32 and the outputs come back in ``x``'s dtype.  ``h_dtype=torch.bfloat16`` stores
    ``H_t`` for backward in 2 bytes instead of 4; backward then recomputes spikes from the rounded
    ``H_t``, so a potential within bf16 rounding of the threshold may take the other branch.
    """
    if h_dtype not in (torch.float32, torch.bfloat16):
        raise ValueError(f"h_dtype must be torch.float32 or torch.bfloat16, got {h_dtype}")
    return _MultiStepTriton.apply(x, k, v0, cfg, h_dtype)


def triton_supports(x: torch.Tensor, cfg: NeuronConfig) -> bool:
    """Auto-dispatch predicate: CUDA tensors of a float dtype the kernel handles."""
    return x.is_cuda and x.dtype in (torch.float32, torch.bfloat16, torch.float16)
