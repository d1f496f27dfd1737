"""Fused multi-step IF/LIF/PLIF on the CPU (the compiled ``cpu_neuron.cpp``, through ctypes).

Same contract and same saved state as :mod:`plif.neurons.bptt` (only ``H_t``), but each pass
over time is one multithreaded sweep instead of ~10 PyTorch ops per step.  fp32 and fp64.
``∂L/∂k`` comes back per neuron and is summed to ``k``'s shape with one ``sum_to_size``.
"""
from __future__ import annotations


import torch

from ..neurons.functional import NeuronConfig, rest_potential
from ..surrogate import get_surrogate
from .cpu_build import load_library

__all__ = ["multi_step_cpu", "cpu_supports"]

_SUFFIX = {torch.float32: "f32", torch.float64: "f64"}


def _k_for_kernel(k: torch.Tensor, step_shape, dtype):
    """``(k contiguous, k_full)``: one value, or one value per neuron of a step."""
    if k.numel() == 1:
        return k.detach().to(dtype).reshape(1).contiguous(), False
    return k.detach().to(dtype).expand(step_shape).contiguous(), True


class _MultiStepCPU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k, v0, cfg: NeuronConfig):
        lib = load_library()
        x, v0 = x.contiguous(), v0.contiguous().to(x.dtype)
        step_shape = x.shape[1:]
        k_c, k_full = _k_for_kernel(k, step_shape, x.dtype) if cfg.leak else (v0, False)  # IF: unused
        spikes, h_seq, v_last = torch.empty_like(x), torch.empty_like(x), torch.empty_like(v0)
        getattr(lib, f"plif_forward_{_SUFFIX[x.dtype]}")(
            x.data_ptr(), k_c.data_ptr(), v0.data_ptr(), spikes.data_ptr(), h_seq.data_ptr(), v_last.data_ptr(),
            x.shape[0], v0.numel(), int(cfg.leak), int(cfg.hard_reset), int(k_full),
            float(cfg.v_threshold), float(rest_potential(cfg)), torch.get_num_threads())
        ctx.save_for_backward(h_seq, v0, k_c, k)
        ctx.cfg, ctx.k_full = cfg, k_full
        return spikes, v_last

    @staticmethod
    def backward(ctx, g_s, g_v_last):
        lib = load_library()
        h_seq, v0, k_c, k = ctx.saved_tensors
        cfg = ctx.cfg
        need_k = bool(ctx.needs_input_grad[1] and cfg.leak)
        g_s = g_s.contiguous().to(h_seq.dtype)
        g_v_last = g_v_last.contiguous().to(h_seq.dtype)
        g_x, g_v0 = torch.empty_like(h_seq), torch.empty_like(v0)
        g_k = torch.empty_like(v0) if need_k else g_v0
        sg = get_surrogate(cfg.surrogate)
        code, (sg_a, sg_b) = sg.code, sg.kernel_constants(float(cfg.alpha))
        getattr(lib, f"plif_backward_{_SUFFIX[h_seq.dtype]}")(
            g_s.data_ptr(), g_v_last.data_ptr(), h_seq.data_ptr(), v0.data_ptr(), k_c.data_ptr(),
            g_x.data_ptr(), g_v0.data_ptr(), g_k.data_ptr(), h_seq.shape[0], v0.numel(),
            int(cfg.leak), int(cfg.hard_reset), int(cfg.detach_reset), code, int(ctx.k_full), int(need_k),
            float(cfg.v_threshold), float(rest_potential(cfg)), sg_a, sg_b, torch.get_num_threads())
        g_k = g_k.sum_to_size(k.shape).to(k.dtype) if need_k else None
        return g_x, g_k, (g_v0 if ctx.needs_input_grad[2] else None), None


def multi_step_cpu(x: torch.Tensor, k: torch.Tensor, v0: torch.Tensor, cfg: NeuronConfig):
    """Fused ``x [T, B, ...]`` -> ``(spikes [T, B, ...], V_{T-1} [B, ...])`` on the CPU.

    ``k`` is a tensor broadcastable to ``x[0]`` (ignored for IF), ``v0`` a full ``[B, ...]`` state;
    ``x`` must be a CPU fp32/fp64 tensor.  Raises ``RuntimeError`` if the library cannot be built.
    """
    if x.device.type != "cpu" or x.dtype not in _SUFFIX:
        raise ValueError(f"the cpu backend takes fp32/fp64 CPU tensors, got {x.dtype} on {x.device}")
    if load_library() is None:
        from .cpu_build import BUILD_ERROR
        raise RuntimeError(f"the cpu neuron kernel is unavailable: {BUILD_ERROR}")
    return _MultiStepCPU.apply(x, k, v0, cfg)


def cpu_supports(x: torch.Tensor, cfg: NeuronConfig) -> bool:
    """Auto-dispatch predicate: CPU fp32/fp64 tensors, once the library has built."""
    return x.device.type == "cpu" and x.dtype in _SUFFIX and load_library() is not None
