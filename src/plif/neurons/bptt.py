"""The paper's BPTT recursion (Sec. 3.7) in closed form, as one ``autograd.Function``.

Forward runs the loop without building a graph and saves only ``H_t`` (plus ``V_{-1}`` and
``k``): the spikes and ``V_{t-1}`` are recomputed from it in backward.  Backward, for
``t = T-1 .. 0``, with ``g`` meaning ``∂L/∂·``:

    g_H_t     = g_S_t σ'(H_t - V_th) + g_V_t ∂V_t/∂H_t
    ∂V_t/∂H_t = 1 - S_t [+ (V_reset - H_t) σ'(H_t - V_th) unless detach_reset]   (hard)
              = 1       [-  V_th          σ'(H_t - V_th) unless detach_reset]   (soft)
    g_X_t     = k g_H_t                  (IF: g_H_t)
    g_V_{t-1} = (1 - k) g_H_t            (IF: g_H_t)
    g_k      += g_H_t (X_t - (V_{t-1} - V_reset)) = g_H_t (H_t - V_{t-1}) / k

``g_k`` is summed over everything ``k`` was broadcast over (all neurons for one τ per layer).
"""
from __future__ import annotations

import torch

from ..surrogate import get_surrogate, heaviside
from .functional import NeuronConfig, charge, reset

__all__ = ["multi_step_bptt", "bptt_forward", "bptt_backward"]


def bptt_forward(x: torch.Tensor, k: torch.Tensor, v0: torch.Tensor, cfg: NeuronConfig):
    """Graph-free forward: returns ``(spikes, h_seq, v_last)``, all ``x``'s dtype."""
    spikes = torch.empty_like(x)
    h_seq = torch.empty_like(x)
    v = v0
    for t in range(x.shape[0]):
        h = charge(x[t], v, k, cfg)  # charge
        s = heaviside(h - cfg.v_threshold)  # fire
        v = reset(h, s, cfg)  # reset
        h_seq[t] = h
        spikes[t] = s
    return spikes, h_seq, v


def bptt_backward(g_s, g_v_last, h_seq, v0, k, cfg: NeuronConfig, need_k: bool):
    """Closed-form gradients: returns ``(g_x [T, ...], g_k (k's shape or None), g_v0)``."""
    sg = get_surrogate(cfg.surrogate)
    g_x = torch.empty_like(h_seq)
    g_k = torch.zeros_like(h_seq[0]) if need_k else None
    g_v = g_v_last
    for t in range(h_seq.shape[0] - 1, -1, -1):
        h = h_seq[t]
        u = h - cfg.v_threshold
        s = heaviside(u)
        dsdh = sg.grad(u, cfg.alpha)
        if cfg.hard_reset:
            dvdh = 1 - s
            if not cfg.detach_reset:
                dvdh = dvdh + (cfg.v_reset - h) * dsdh
        else:
            dvdh = torch.ones_like(h)
            if not cfg.detach_reset:
                dvdh = dvdh - cfg.v_threshold * dsdh
        g_h = g_s[t] * dsdh + g_v * dvdh
        if cfg.leak:
            g_x[t] = g_h * k
            if need_k:
                if t > 0:
                    h_prev = h_seq[t - 1]
                    v_prev = reset(h_prev, heaviside(h_prev - cfg.v_threshold), cfg)
                else:
                    v_prev = v0
                g_k += g_h * (h - v_prev) / k
            g_v = g_h * (1 - k)
        else:
            g_x[t] = g_h
            g_v = g_h
    if need_k:
        g_k = g_k.sum_to_size(k.shape)
    return g_x, g_k, g_v


class _MultiStepBPTT(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k, v0, cfg: NeuronConfig):
        spikes, h_seq, v_last = bptt_forward(x, k, v0, cfg)
        ctx.save_for_backward(h_seq, v0, k)
        ctx.cfg = cfg
        return spikes, v_last

    @staticmethod
    def backward(ctx, g_s, g_v_last):
        h_seq, v0, k = ctx.saved_tensors
        need_k = ctx.needs_input_grad[1] and ctx.cfg.leak
        g_x, g_k, g_v0 = bptt_backward(g_s, g_v_last, h_seq, v0, k, ctx.cfg, need_k)
        return g_x, g_k, (g_v0 if ctx.needs_input_grad[2] else None), None


def multi_step_bptt(x: torch.Tensor, k: torch.Tensor, v0: torch.Tensor, cfg: NeuronConfig):
    """``x [T, B, ...]`` -> ``(spikes [T, B, ...], V_{T-1} [B, ...])`` with the closed-form backward.

    ``k`` is a tensor broadcastable to ``x[0]`` (ignored for IF); ``v0`` a full ``[B, ...]`` state.
    """
    return _MultiStepBPTT.apply(x, k, v0, cfg)


