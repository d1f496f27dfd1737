"""The fused block after a convolution, as plain PyTorch: the specification of its fast backends.

The paper's block ``c…-BN-PLIF-MPk2s2`` (and ``BN-PLIF`` without the pool) is, after the
convolution's output ``y [T, B, C, H, W]``:

    z_t   = y_t · scale[c] + shift[c]                  BatchNorm as a per-channel affine
    S, V  = neuron(z, k, V_{-1})                       IF / LIF / PLIF over all T steps
    out_t = maxpool_2×2,stride 2(S_t)                  optional; floor on odd H, W

with ``scale = γ·invstd`` and ``shift = β − μ·scale`` (μ, invstd: the batch's statistics in training,
the running ones in evaluation).  The statistics and BatchNorm's own parameter gradients are
per-channel work done outside the backends; a backend does the full-size work.  Every backend (C++
on the CPU, Triton on CUDA) implements the two functions below with the same signature and is
tested against them.

``block_forward(y, scale, shift, k, v0, cfg, pool, need_state) -> (out, place, v_last)``
    y       ``[T, B, C, H, W]`` fp32, fp64 or bf16 (autocast), contiguous
    scale, shift  ``[C]`` in the state dtype (fp32 for bf16 ``y``; :func:`state_dtype`)
    k       ``[1]`` (one τ per layer) or ``[C]`` (per channel), state dtype; unused without ``cfg.leak``
    v0      ``[B, C, H, W]`` state dtype, or ``None`` (the rest potential)
    pool    2×2 stride-2 max-pooling of the spikes
    out     ``[T, B, C, H', W']`` spikes (0 or 1) in ``y``'s dtype; ``H' = H // 2`` with ``pool``
    place   ``uint8 [T, B, C, H', W']`` with ``pool``: the chosen element's place in its window,
            ``dy·2 + dx``, the first maximum row by row (as ``max_pool2d`` chooses); else ``(0,)``
    v_last  ``[B, C, H, W]`` state dtype, ``V_{T-1}``, when ``need_state``; else ``(0,)``

``block_backward(y, scale, shift, mean, k, v0, cfg, pool, place, g_out, g_v_last, need_k)
-> (g_z, g_v0, g_k, sum_g, sum_gc)``
    g_out   ``[T, B, C, H', W']`` ``∂L/∂out`` (any float dtype); ``g_v_last`` ``[B, C, H, W]`` or ``None``
    mean    ``[C]`` state dtype: the centre of the sums below (the batch mean)
    g_z     ``[T, B, C, H, W]`` state dtype: ``∂L/∂z``
    g_v0    ``[B, C, H, W]`` state dtype: ``∂L/∂V_{-1}`` (zeros when ``v0`` is None)
    g_k     ``k``'s shape, state dtype: ``∂L/∂k`` summed over the neurons sharing it (zeros unless
            ``need_k`` and ``cfg.leak``)
    sum_g   ``[C]`` Σ over t, b, h, w of ``g_z``            (= ∂L/∂β)
    sum_gc  ``[C]`` Σ of ``g_z · (y − mean)``               (= ∂L/∂γ / invstd)

The backward recomputes the forward from ``y``: nothing of the neuron's potentials is kept.  The
gradient of the convolution's output then follows in one elementwise pass,
:func:`bn_input_grad`.  In fp32, ``z`` is rounded after the product and after the sum (no fused
multiply-add), so a backend's ``z``, potentials and spikes are bit-identical to these.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..neurons.functional import NeuronConfig, rest_potential, state_dtype
from ..neurons.reference import multi_step_reference

__all__ = ["block_forward_reference", "block_backward_reference", "bn_input_grad", "pooled_place"]


def _per_channel(v: Tensor) -> Tensor:
    return v.view(-1, 1, 1)


def _affine(y: Tensor, scale: Tensor, shift: Tensor) -> Tensor:
    wide = state_dtype(y.dtype)
    return y.to(wide) * _per_channel(scale) + _per_channel(shift)


def pooled_place(s: Tensor) -> tuple[Tensor, Tensor]:
    """``max_pool2d(s, 2, 2)`` of ``s [T, B, C, H, W]`` and the place of each chosen element in its
    window, ``dy·2 + dx`` (uint8): the element ``max_pool2d`` itself picks."""
    T, B, C, H, W = s.shape
    out, idx = F.max_pool2d(s.flatten(0, 1), 2, 2, return_indices=True)
    row, col = idx // W, idx % W
    h_out, w_out = out.shape[-2:]
    dy = row - 2 * torch.arange(h_out, device=s.device).view(-1, 1)
    dx = col - 2 * torch.arange(w_out, device=s.device).view(1, -1)
    place = (dy * 2 + dx).to(torch.uint8)
    return out.unflatten(0, (T, B)), place.unflatten(0, (T, B))


def _k_view(k: Tensor) -> Tensor:
    return _per_channel(k) if k.numel() > 1 else k.reshape(())


def _run(y, scale, shift, k, v0, cfg, pool):
    z = _affine(y, scale, shift)
    s, v_last = multi_step_reference(z, _k_view(k), v0, cfg)
    if pool:
        out, place = pooled_place(s)
    else:
        out, place = s, s.new_empty((0,), dtype=torch.uint8)
    return z, out, place, v_last


def block_forward_reference(y: Tensor, scale: Tensor, shift: Tensor, k: Tensor, v0: Tensor | None,
                            cfg: NeuronConfig, pool: bool, need_state: bool = False):
    """``(out, place, v_last)`` as the module docstring states."""
    with torch.no_grad():
        _, out, place, v_last = _run(y, scale, shift, k, v0, cfg, pool)
    if v_last is None or not need_state:
        v_last = y.new_empty((0,), dtype=state_dtype(y.dtype))
    elif v_last.dim() == 0 or v_last.shape != y.shape[1:]:
        v_last = v_last.expand(y.shape[1:]).clone()
    return out.to(y.dtype), place, v_last


def block_backward_reference(y: Tensor, scale: Tensor, shift: Tensor, mean: Tensor, k: Tensor,
                             v0: Tensor | None, cfg: NeuronConfig, pool: bool, place: Tensor, g_out: Tensor,
                             g_v_last: Tensor | None, need_k: bool = True):
    """``(g_z, g_v0, g_k, sum_g, sum_gc)`` as the module docstring states (``place`` is recomputed
    here; a backend reads it)."""
    wide = state_dtype(y.dtype)
    with torch.enable_grad():
        kk = k.detach().to(wide).requires_grad_(True)
        start = (torch.full(y.shape[1:], rest_potential(cfg), dtype=wide, device=y.device) if v0 is None
                 else v0.detach().to(wide))
        start.requires_grad_(True)
        z = _affine(y, scale, shift).detach().requires_grad_(True)
        s, v_last = multi_step_reference(z, _k_view(kk), start, cfg)
        out = pooled_place(s)[0] if pool else s
        outs, grads = [out], [g_out.to(out.dtype)]
        if g_v_last is not None:
            outs.append(v_last)
            grads.append(g_v_last.to(wide))
        g_z, g_v0, g_k = torch.autograd.grad(outs, [z, start, kk], grads, allow_unused=True)
    g_v0 = torch.zeros_like(start) if g_v0 is None else g_v0
    g_k = torch.zeros_like(kk) if (g_k is None or not need_k or not cfg.leak) else g_k
    dims = (0, 1, 3, 4)
    sum_g = g_z.sum(dims)
    sum_gc = (g_z * (y.to(wide) - _per_channel(mean))).sum(dims)
    return g_z, g_v0.detach(), g_k.detach().reshape(k.shape), sum_g, sum_gc


def bn_input_grad(g_z: Tensor, y: Tensor, mean: Tensor, invstd: Tensor, scale: Tensor, sum_g: Tensor,
                  sum_gc: Tensor, training: bool) -> Tensor:
    """``∂L/∂y [T, B, C, H, W]`` in ``y``'s dtype from :func:`block_backward_reference`'s outputs.

    Training (batch statistics, ``n = T·B·H·W`` values per channel):
    ``∂y = scale·(g_z − sum_g/n − (y − μ)·invstd²·sum_gc/n)``; evaluation (running statistics,
    constants): ``∂y = scale·g_z``."""
    if not training:
        return (g_z * _per_channel(scale)).to(y.dtype)
    n = g_z.numel() // g_z.shape[2]
    wide = g_z.dtype
    centred = y.to(wide) - _per_channel(mean)
    g = g_z - _per_channel(sum_g / n) - centred * _per_channel(invstd * invstd * sum_gc / n)
    return (g * _per_channel(scale)).to(y.dtype)
