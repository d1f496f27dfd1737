"""Fused multi-step IF/LIF/PLIF on the CPU (the compiled ``cpu_neuron.h`` templates, through ctypes).

Same contract and same saved state as :mod:`plif.neurons.bptt` (only ``H_t``), but each pass
over time is one multithreaded sweep instead of ~10 PyTorch ops per step.  fp32 and fp64; bf16
inputs (CPU autocast) are read as bf16 by the kernel itself and widened in registers: state, ``H``
and the arithmetic are fp32, spikes and ``∂x`` are written in bf16 (rounded to nearest even, as
``Tensor.to`` rounds), with no fp32 copy of ``x``.

The two sweeps are ``torch.library`` custom operators, ``plif::cpu_forward`` and
``plif::cpu_backward``, with fake (shape-only) implementations and the backward registered
through ``register_autograd``, so ``torch.compile(fullgraph=True)`` traces a network through
them with dynamic batch sizes.  ``k`` reaches the kernel as one value or one value per neuron;
the expansion happens outside the operator, so autograd folds ``∂L/∂k`` back to ``k``'s shape.
"""
from __future__ import annotations

import torch
from torch import Tensor

from ..neurons.functional import NeuronConfig, rest_potential
from ..surrogate import get_surrogate
from .cpu_build import SUFFIX, library_or_raise, unavailable

__all__ = ["multi_step_cpu", "cpu_supports", "cpu_unavailable", "cpu_forward", "cpu_backward"]

_WIDE = {torch.bfloat16: torch.float32}  # input dtype -> the kernel's state dtype, where they differ


def _state_dtype(dtype: torch.dtype) -> torch.dtype:
    return _WIDE.get(dtype, dtype)


def _check_state(dtype: torch.dtype, v0: Tensor, k: Tensor) -> None:
    """The kernel reads ``v0`` and ``k`` (and ``H``) as ``dtype``: anything else would be misread."""
    if v0.dtype != dtype or k.dtype != dtype:
        raise ValueError(f"the cpu kernel keeps its state in {dtype}: v0 and k must be {dtype}, "
                         f"got {v0.dtype} and {k.dtype}")


def _lib():
    return library_or_raise("cpu neuron kernel")


# ------------------------------------------------------------------------------------ operators
@torch.library.custom_op("plif::cpu_forward", mutates_args=())
def cpu_forward(x: Tensor, k: Tensor, v0: Tensor, leak: bool, hard: bool, v_th: float, v_rest: float,
                detach: bool, sg_code: int, sg_a: float, sg_b: float,
                keep_h: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """``(spikes, H, V_{T-1})``; ``k`` holds 1 value or ``v0.numel()`` values (ignored without leak).
    ``detach`` and the surrogate arguments are only for the backward (see :func:`_setup`).
    ``x`` repeated over time (stride 0 along T: a static input after the hoisted first layers) is
    read in place, never copied T times.  ``keep_h=False``: nothing will be differentiated, so
    ``H`` is not written (an empty tensor comes back)."""
    _check_state(_state_dtype(x.dtype), v0, k)
    n = v0.numel()
    static = x.shape[0] > 1 and x.stride(0) == 0
    xr = (x[0] if static else x).contiguous()
    v0, k = v0.contiguous(), k.contiguous()
    spikes, v_last = x.new_empty(x.shape), torch.empty_like(v0)
    h_seq = x.new_empty(x.shape if keep_h else (0,), dtype=v0.dtype)
    getattr(_lib(), f"plif_forward_{SUFFIX[x.dtype]}")(
        xr.data_ptr(), (k if leak else v0).data_ptr(), v0.data_ptr(), spikes.data_ptr(),
        h_seq.data_ptr() if keep_h else None, v_last.data_ptr(), x.shape[0], n, 0 if static else n, int(leak),
        int(hard), int(leak and k.numel() > 1), float(v_th), float(v_rest), torch.get_num_threads())
    return spikes, h_seq, v_last


@cpu_forward.register_fake
def _(x, k, v0, leak, hard, v_th, v_rest, detach, sg_code, sg_a, sg_b, keep_h=True):
    wide = _state_dtype(x.dtype)
    return x.new_empty(x.shape), x.new_empty(x.shape if keep_h else (0,), dtype=wide), torch.empty_like(v0)


@torch.library.custom_op("plif::cpu_backward", mutates_args=())
def cpu_backward(g_s: Tensor, g_v_last: Tensor, h_seq: Tensor, v0: Tensor, k: Tensor, leak: bool, hard: bool,
                 v_th: float, v_rest: float, detach: bool, sg_code: int, sg_a: float, sg_b: float,
                 need_k: bool) -> tuple[Tensor, Tensor, Tensor]:
    """``(∂x, ∂V_{-1}, ∂k per neuron)`` (the last is zeros unless ``need_k``); ``∂x`` in ``g_s``'s
    dtype when that is bf16 over an fp32 ``H`` (the gradient of bf16 spikes), else in ``H``'s."""
    _check_state(h_seq.dtype, v0, k)
    g_s = g_s.contiguous().to(_grad_dtype(g_s.dtype, h_seq.dtype))
    g_v_last = g_v_last.contiguous().to(h_seq.dtype)
    h_seq, v0, k = h_seq.contiguous(), v0.contiguous(), k.contiguous()
    g_x, g_v0 = torch.empty_like(g_s), torch.empty_like(v0)
    g_k = torch.empty_like(v0) if need_k else torch.zeros_like(v0)
    getattr(_lib(), f"plif_backward_{SUFFIX[g_s.dtype]}")(
        g_s.data_ptr(), g_v_last.data_ptr(), h_seq.data_ptr(), v0.data_ptr(), (k if leak else v0).data_ptr(),
        g_x.data_ptr(), g_v0.data_ptr(), g_k.data_ptr(), h_seq.shape[0], v0.numel(),
        int(leak), int(hard), int(detach), sg_code, int(leak and k.numel() > 1), int(need_k),
        float(v_th), float(v_rest), sg_a, sg_b, torch.get_num_threads())
    return g_x, g_v0, g_k


@cpu_backward.register_fake
def _(g_s, g_v_last, h_seq, v0, k, leak, hard, v_th, v_rest, detach, sg_code, sg_a, sg_b, need_k):
    return torch.empty_like(h_seq, dtype=_grad_dtype(g_s.dtype, h_seq.dtype)), torch.empty_like(v0), torch.empty_like(v0)


def _grad_dtype(g_dtype: torch.dtype, state: torch.dtype) -> torch.dtype:
    """The dtype the backward sweep reads ``∂L/∂S`` in (and writes ``∂x`` in)."""
    return g_dtype if _WIDE.get(g_dtype) == state else state


def _setup(ctx, inputs, output):
    x, k, v0, leak, hard, v_th, v_rest, detach, sg_code, sg_a, sg_b = inputs[:11]
    # H is an output only for backward: without this autograd would hand backward a full-size
    # zero ∂H (and a zero ∂V_{T-1} when V is unused), +22% live peak on DVS128 Gesture
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(output[1], v0, k)
    ctx.args = (leak, hard, v_th, v_rest, detach, sg_code, sg_a, sg_b)
    ctx.x_dtype = x.dtype


def _backward(ctx, g_s, g_h, g_v_last):
    h_seq, v0, k = ctx.saved_tensors
    leak = ctx.args[0]
    need_k = bool(ctx.needs_input_grad[1] and leak)
    if g_s is None and g_v_last is None:  # only H reached the loss, and H is not differentiable
        return (None,) * 12
    if h_seq.numel() == 0:
        raise RuntimeError("plif::cpu_forward ran with keep_h=False: it cannot be differentiated")
    g_s = torch.zeros_like(h_seq, dtype=ctx.x_dtype) if g_s is None else g_s
    g_v_last = torch.zeros_like(v0) if g_v_last is None else g_v_last
    g_x, g_v0, g_k = cpu_backward(g_s, g_v_last, h_seq, v0, k, *ctx.args, need_k)
    g_k = g_k.sum_to_size(k.shape) if need_k else None
    return g_x.to(ctx.x_dtype), g_k, g_v0, None, None, None, None, None, None, None, None, None


cpu_forward.register_autograd(_backward, setup_context=_setup)


# -------------------------------------------------------------------------------------- backend
def multi_step_cpu(x: torch.Tensor, k: torch.Tensor, v0: torch.Tensor, cfg: NeuronConfig):
    """Fused ``x [T, B, ...]`` -> ``(spikes [T, B, ...], V_{T-1} [B, ...])`` on the CPU.

    ``k`` is a tensor broadcastable to ``x[0]`` (ignored for IF), ``v0`` a full ``[B, ...]`` state;
    ``x`` must be a CPU fp32/fp64/bf16 tensor (bf16: fp32 state; spikes and ``V_{T-1}`` come back
    in bf16).  Raises ``RuntimeError`` if the library cannot be built.
    """
    if not cpu_supports(x, cfg):
        raise ValueError(f"the cpu backend takes fp32/fp64/bf16 CPU tensors, got {x.dtype} on {x.device}")
    wide = _state_dtype(x.dtype)
    k = k.to(wide)
    k = k.reshape(1) if k.numel() == 1 else k.expand(x.shape[1:])
    sg = get_surrogate(cfg.surrogate)
    sg_a, sg_b = sg.kernel_constants(float(cfg.alpha))
    v0 = v0.to(wide)
    keep_h = torch.is_grad_enabled() and (x.requires_grad or k.requires_grad or v0.requires_grad)
    spikes, _, v_last = cpu_forward(x, k, v0, cfg.leak, cfg.hard_reset, float(cfg.v_threshold),
                                    float(rest_potential(cfg)), cfg.detach_reset, sg.code, sg_a, sg_b, keep_h)
    return spikes, v_last.to(x.dtype)


def cpu_unavailable() -> str | None:
    """Why the kernel cannot run here (build it now if needed), or ``None`` when it can."""
    return unavailable()


def cpu_supports(x: torch.Tensor, cfg: NeuronConfig) -> bool:
    """Auto-dispatch predicate: CPU fp32/fp64/bf16 tensors (the table only lists this backend once it built)."""
    return x.device.type == "cpu" and (x.dtype in SUFFIX or x.dtype in _WIDE)
