"""Fused multi-step IF/LIF/PLIF in Triton: one kernel for all T steps forward, one backward.

Each program owns a block of neurons of one ``k`` channel and loops over ``t`` with the membrane
potential in registers, so ``X`` is read once, ``S`` and ``H`` written once.  Only ``H_t`` is kept
for backward (fp32, or bf16 to halve the bytes): spikes and ``V_{t-1}`` are recomputed from it.
The backward is the closed-form recursion of :mod:`plif.neurons.bptt`; ``∂L/∂k`` is reduced per
block in fp32 into a ``[C, blocks]`` buffer and summed once on the device: deterministic, no
atomics, no host synchronisation (so it can be captured in a CUDA graph).

Variants (leak, hard/soft reset, detached reset, surrogate, per-channel ``k``) are ``tl.constexpr``
flags, chosen with the launch by :mod:`.triton_launch`.  State and accumulation are fp32 whatever
the input dtype, and whatever type the scalar arguments arrive in (fp64 under Inductor).  Floating
point contraction is switched off so that ``H_t`` is bit-identical to the PyTorch reference in
fp32, which makes the spikes identical too.

Two ways in, one pair of kernels: an eager call enters an ``autograd.Function`` directly (no
``torch.library`` dispatch: 0.73 of the dispatched call's wall time at T8 B16 C128 28×28 on an
H200, ``docs/gpu/h200-2026-11-27/``), while a traced call (``torch.compile``, ``opcheck``) goes
through the custom operators ``plif::triton_forward`` / ``plif::triton_backward``, which Inductor
sees.  Both compute the same bits.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor
from torch.library import wrap_triton

from ..neurons.functional import NeuronConfig, rest_potential
from ..surrogate import get_surrogate
from . import self_check  # noqa: F401  (puts the kernels' first-use check into the neuron dispatch)
from .layout import flat_k, k_layout
from .triton_launch import backward_flags, forward_flags, launch_config

__all__ = ["multi_step_triton", "triton_supports", "triton_forward", "triton_backward", "surrogate_grad", "spike_reset",
           "dv_dh", "launch_kernel"]


# ----------------------------------------------------------------------------------------- kernels
@triton.jit
def surrogate_grad(u, sg_a, sg_b, SG: tl.constexpr):
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
def spike_reset(h, spike, v_th, v_reset, HARD: tl.constexpr):
    """``V_t`` from ``H_t``; ``where`` equals ``H(1-S) + V_reset S`` exactly for S in {0, 1}."""
    if HARD:
        return tl.where(spike, v_reset, h)
    else:
        return tl.where(spike, h - v_th, h)


@triton.jit
def dv_dh(h, sg, v_th, v_reset, HARD: tl.constexpr, DETACH: tl.constexpr):
    """``∂V_t/∂H_t``: the reset's own path, plus the spike's through the surrogate unless detached."""
    if HARD:
        d = tl.where(h - v_th >= 0.0, 0.0, 1.0)
        if not DETACH:
            d += (v_reset - h) * sg
    else:
        d = tl.full(h.shape, 1.0, h.dtype)
        if not DETACH:
            d -= v_th * sg
    return d


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
    # Inductor passes Python floats as fp64 scalars: fp32 here, or they would widen the state
    v_th = tl.cast(v_th, tl.float32)
    v_reset = tl.cast(v_reset, tl.float32)
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
        v = spike_reset(h, spike, v_th, v_reset, HARD)  # reset
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
    # Inductor passes Python floats as fp64 scalars: fp32 here, or they would widen ∂V and ∂k
    v_th = tl.cast(v_th, tl.float32)
    v_reset = tl.cast(v_reset, tl.float32)
    sg_a = tl.cast(sg_a, tl.float32)
    sg_b = tl.cast(sg_b, tl.float32)
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
        g_s = tl.load(g_s_ptr + step, mask=mask, other=0.0).to(tl.float32)
        sg = surrogate_grad(h - v_th, sg_a, sg_b, SG)
        g_h = g_s * sg + g_v * dv_dh(h, sg, v_th, v_reset, HARD, DETACH)
        if LEAK:
            tl.store(g_x_ptr + step, (g_h * k).to(g_x_ptr.dtype.element_ty), mask=mask)
            if NEED_K:
                v_prev = tl.where(has_prev, spike_reset(h_prev, (h_prev - v_th) >= 0.0, v_th, v_reset, HARD), v0)
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


# ------------------------------------------------------------------------------------ operators
def _grid(channels: int, m, block: int):
    return (channels, triton.cdiv(m, block))


def launch_kernel(kernel, grid, x, *args, **meta):
    """Eagerly: launch with FMA contraction off (``H_t`` bit-identical to PyTorch).  While the
    operator is traced (``torch.compile``, ``opcheck``): hand the kernel over through
    ``wrap_triton``.  Inductor does not forward ``enable_fp_fusion`` for user kernels, so a
    compiled ``H_t`` may differ from eager by one rounding (a potential within one ulp of the
    threshold may spike differently)."""
    if _tracing(x):
        return wrap_triton(kernel)[grid](x, *args, **meta)
    return kernel[grid](x, *args, **meta, enable_fp_fusion=False)


def _tracing(x: Tensor) -> bool:
    if type(x) is not torch.Tensor:  # fake or functional tensors
        return True
    try:
        return torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.PROXY) is not None
    except AttributeError:  # an older torch without the key: assume tracing (always correct, maybe FMA)
        return True


def _steps(x: Tensor, per_layer: bool) -> Tensor:
    """``x`` as the kernels read it: ``T`` outermost, each step one dense block of ``N`` neurons.
    A channels-last ``[T, B, C, H, W]`` (a channels-last network's convolution output) is read in
    place when ``k`` is one per layer, since every neuron is then alike and memory order does not
    matter; anything else is made contiguous."""
    if x.is_contiguous():
        return x
    if (per_layer and x.dim() == 5 and x.stride(0) == x[0].numel()
            and x[0].is_contiguous(memory_format=torch.channels_last)):
        return x
    return x.contiguous()


def _strided_as(t: Tensor, ref: Tensor) -> Tensor:
    """``t`` laid out like ``ref`` (same shape), so one flat offset means one neuron in both; a copy
    only when the strides differ (an expanded ∂S from ``sum()``, a state made another way)."""
    if t.stride() == ref.stride():
        return t
    return torch.empty_like(ref, dtype=t.dtype).copy_(t)


def _forward_impl(x: Tensor, k: Tensor, v0: Tensor, inner: int, leak: bool, hard: bool, v_th: float,
                  v_rest: float, h_bf16: bool, detach: bool, sg_code: int, sg_a: float,
                  sg_b: float) -> tuple[Tensor, Tensor, Tensor]:
    """``(spikes, H, V_{T-1})``.  ``k [C]``: one value per channel, each shared by ``inner``
    consecutive neurons (``C = 1``: one per layer); ignored without leak.  ``detach`` and the
    surrogate arguments are only read by the backward.  The outputs are laid out like ``x`` as
    :func:`_steps` reads it."""
    channels = k.numel()
    x, k = _steps(x, channels == 1), k.contiguous()
    v0 = _strided_as(v0, x[0])
    T, n = x.shape[0], v0.numel()
    m = n // channels
    spikes = torch.empty_like(x)
    h_seq = torch.empty_like(x, dtype=torch.bfloat16 if h_bf16 else torch.float32)
    v_last = torch.empty_like(v0)
    launch = launch_config(m)
    launch_kernel(_forward_kernel, _grid(channels, m, launch.block),
        x, k, v0, spikes, h_seq, v_last, T, n, m, inner, channels, v_th, v_rest,
        **forward_flags(leak, hard, channels > 1, launch.block), num_warps=launch.num_warps)
    return spikes, h_seq, v_last


def _backward_impl(g_s: Tensor, g_v_last: Tensor, h_seq: Tensor, v0: Tensor, k: Tensor, inner: int,
                   leak: bool, hard: bool, v_th: float, v_rest: float, h_bf16: bool, detach: bool,
                   sg_code: int, sg_a: float, sg_b: float, need_k: bool, direct: bool = False):
    """``(∂x in g_s's dtype, ∂V_{-1}, ∂k [C] in fp32)``; ``∂k`` is zeros unless ``need_k`` (``direct``,
    the eager call: ``None`` then, and the per-block partials are not zero-filled first: every block
    writes its own; the operator's schema returns a tensor)."""
    channels = k.numel()
    g_s, k = _strided_as(g_s, h_seq), k.contiguous()
    v0 = _strided_as(v0, h_seq[0])
    g_v_last = _strided_as(g_v_last, v0)
    T, n = h_seq.shape[0], v0.numel()
    m = n // channels
    g_x = torch.empty_like(h_seq, dtype=g_s.dtype)
    g_v0 = torch.empty_like(v0)
    launch = launch_config(m)
    grid = _grid(channels, m, launch.block)
    # the direct call never reads the partials it does not need, and the kernel writes all it needs
    g_k_part = (torch.empty if direct else torch.zeros)(grid, dtype=torch.float32, device=h_seq.device)
    launch_kernel(_backward_kernel, grid,
        g_s, g_v_last, h_seq, v0, k, g_x, g_v0, g_k_part, T, n, (T - 1) * n, m, inner, channels,
        v_th, v_rest, sg_a, sg_b,
        **backward_flags(leak, hard, detach, sg_code, channels > 1, need_k, launch.block),
        num_warps=launch.num_warps)
    return g_x, g_v0, (None if direct and not need_k else g_k_part.sum(dim=1))


triton_forward = torch.library.triton_op("plif::triton_forward", _forward_impl, mutates_args=())


@torch.library.triton_op("plif::triton_backward", mutates_args=())
def triton_backward(g_s: Tensor, g_v_last: Tensor, h_seq: Tensor, v0: Tensor, k: Tensor, inner: int,
                    leak: bool, hard: bool, v_th: float, v_rest: float, h_bf16: bool, detach: bool,
                    sg_code: int, sg_a: float, sg_b: float, need_k: bool) -> tuple[Tensor, Tensor, Tensor]:
    """``(∂x in g_s's dtype, ∂V_{-1}, ∂k [C] in fp32)`` (the last is zeros unless ``need_k``)."""
    return _backward_impl(g_s, g_v_last, h_seq, v0, k, inner, leak, hard, v_th, v_rest, h_bf16, detach,
                          sg_code, sg_a, sg_b, need_k)


def _setup(ctx, inputs, output):
    x, k, v0, *args = inputs
    ctx.set_materialize_grads(False)  # no full-size zero ∂H for the output only backward reads
    ctx.save_for_backward(output[1], v0, k)
    ctx.args = tuple(args)


def _backward(ctx, g_s, g_h, g_v_last, direct: bool = False):
    h_seq, v0, k = ctx.saved_tensors
    need_k = bool(ctx.needs_input_grad[1] and ctx.args[1])  # args: inner, leak, ...
    if g_s is None and g_v_last is None:  # only H reached the loss, and H is not differentiable
        return None, None, None, *([None] * len(ctx.args))
    g_s = torch.zeros(h_seq.shape, dtype=v0.dtype, device=v0.device) if g_s is None else g_s
    g_v_last = torch.zeros_like(v0) if g_v_last is None else g_v_last
    if direct:
        g_x, g_v0, g_k = _backward_impl(g_s, g_v_last, h_seq, v0, k, *ctx.args, need_k, direct=True)
    else:
        g_x, g_v0, g_k = triton_backward(g_s, g_v_last, h_seq, v0, k, *ctx.args, need_k)
    return g_x, (g_k.to(k.dtype) if need_k else None), g_v0, *([None] * len(ctx.args))


triton_forward.register_autograd(_backward, setup_context=_setup)


class _EagerNeuron(torch.autograd.Function):
    """The eager call: the same kernels and autograd contract as ``plif::triton_forward``, entered
    directly instead of through the dispatcher (its host work is most of a small layer's call)."""

    @staticmethod
    def forward(ctx, x, k, v0, *args):
        out = _forward_impl(x, k, v0, *args)
        ctx.mark_non_differentiable(out[1])
        _setup(ctx, (x, k, v0, *args), out)
        return out

    @staticmethod
    def backward(ctx, g_s, g_h, g_v_last):
        return _backward(ctx, g_s, g_h, g_v_last, direct=True)


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
    args = _operator_args(x, k, v0, cfg, h_dtype)
    # is_compiling first: Dynamo folds it, and never traces the dispatch-mode query
    eager = not torch.compiler.is_compiling() and not _tracing(x)
    spikes, _, v_last = (_EagerNeuron.apply if eager else triton_forward)(*args)
    return spikes, v_last


def _operator_args(x: Tensor, k: Tensor, v0: Tensor, cfg: NeuronConfig, h_dtype: torch.dtype) -> tuple:
    """The arguments of ``plif::triton_forward`` (and of the eager call) for one neuron layer's call."""
    step_shape = tuple(x.shape[1:])
    if cfg.leak:
        layout = k_layout(tuple(k.shape), step_shape)
        k_flat, inner = flat_k(k, step_shape, layout), layout.inner  # autograd folds ∂k back to k's shape
    else:
        k_flat, inner = torch.ones(1, dtype=x.dtype, device=x.device), 1
    sg = get_surrogate(cfg.surrogate)
    sg_a, sg_b = sg.kernel_constants(float(cfg.alpha))
    return (x, k_flat, v0.to(x.dtype), inner, cfg.leak, cfg.hard_reset, float(cfg.v_threshold),
            float(rest_potential(cfg)), h_dtype == torch.bfloat16, cfg.detach_reset, sg.code, sg_a, sg_b)


def triton_supports(x: torch.Tensor, cfg: NeuronConfig) -> bool:
    """Auto-dispatch predicate: CUDA tensors of a float dtype the kernel handles."""
    return x.is_cuda and x.dtype in (torch.float32, torch.bfloat16, torch.float16)
