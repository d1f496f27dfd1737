"""The fused block after a convolution on the CPU: the compiled ``cpu_block.h`` templates, through ctypes.

Three functions with the signatures and meaning of :mod:`plif.kernels.block_reference`
(:func:`block_forward_cpu`, :func:`block_backward_cpu`, :func:`bn_input_grad_cpu`), and the
batch statistics BatchNorm needs (:func:`batch_stats_cpu`).  Each is a ``torch.library`` custom
operator (``plif::cpu_block_forward``, ``plif::cpu_block_backward``, ``plif::cpu_bn_input_grad``,
``plif::cpu_batch_stats``) with a fake implementation, so ``torch.compile(fullgraph=True)`` traces
through them; their autograd is the fused block's (:mod:`plif.layers.fused_block`).

fp32 and fp64; bf16 ``y`` (CPU autocast) is read as bf16 and widened in registers, with the state,
``scale``, ``shift``, ``k`` and ``∂z`` in fp32 and the spikes and ``∂y`` in bf16.  A ``y`` repeated
over time (stride 0 along T: a static input's hoisted convolution) is read in place.  Spikes,
places and ``V_{T-1}`` are bit-identical to the reference in fp32 and fp64; the gradients equal it
to rounding (the per-channel sums are added in another order, in double).
"""
from __future__ import annotations

import torch
from torch import Tensor

from ..neurons.functional import NeuronConfig, rest_potential, state_dtype
from ..surrogate import get_surrogate
from .cpu_build import SUFFIX, library_or_raise, unavailable  # noqa: F401  (unavailable: the table names it)

__all__ = ["block_forward_cpu", "block_backward_cpu", "bn_input_grad_cpu", "bn_input_grad_cpu_", "block_backward_cpu_",
           "block_backward_summed_cpu", "batch_stats_cpu", "cpu_block_supports"]


def _lib():
    return library_or_raise("cpu block kernel")


def _ptr(t: Tensor | None):
    return None if t is None else t.data_ptr()


def _time_step(y: Tensor) -> tuple[Tensor, int]:
    """``(the tensor the kernel reads, elements between its time-steps)``: a y repeated over T
    (stride 0) is read from its first step again at every step."""
    if y.shape[0] > 1 and y.stride(0) == 0:
        return y[0].contiguous(), 0
    y = y.contiguous()
    return y, y[0].numel()


def _pooled(y: Tensor, pool: bool) -> tuple:
    T, B, C, H, W = y.shape
    return (T, B, C, H // 2, W // 2) if pool else (T, B, C, H, W)


def _state(t: Tensor | None, wide: torch.dtype) -> Tensor | None:
    return None if t is None else t.to(wide).contiguous()


def _backward_inputs(y: Tensor, state: tuple, v0: Tensor | None, g_v_last: Tensor | None, g_out: Tensor,
                     place: Tensor) -> tuple:
    """Both backward kernels' inputs besides ``y``: ``state`` (the per-channel tensors, then ``k``), ``v0`` and
    ``∂V_{T-1}`` in the state dtype, ``∂out`` in ``y``'s, all contiguous."""
    wide = state_dtype(y.dtype)
    return ([_state(t, wide) for t in state], _state(v0, wide), _state(g_v_last, wide),
            g_out.to(y.dtype).contiguous(), place.contiguous())


def _backward_outputs(y: Tensor, k: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Both backward kernels' ``(∂V_{-1}, ∂k, Σ∂z, Σ∂z·(y - mean))``; ``∂k`` zeroed (IF or ``need_k=False``
    leave it)."""
    wide, C = state_dtype(y.dtype), y.shape[2]
    return (torch.empty(y.shape[1:], dtype=wide), torch.zeros(k.shape, dtype=wide), torch.empty(C, dtype=wide),
            torch.empty(C, dtype=wide))


# ------------------------------------------------------------------------------------ operators
@torch.library.custom_op("plif::cpu_block_forward", mutates_args=())
def _forward(y: Tensor, scale: Tensor, shift: Tensor, k: Tensor, v0: Tensor | None, leak: bool, hard: bool,
             v_th: float, v_reset: float, pool: bool, need_state: bool) -> tuple[Tensor, Tensor, Tensor]:
    wide = state_dtype(y.dtype)
    T, B, C, H, W = y.shape
    src, y_step = _time_step(y)
    out = y.new_empty(_pooled(y, pool), dtype=y.dtype)
    place = torch.empty(out.shape if pool else (0,), dtype=torch.uint8)
    v_last = torch.empty((B, C, H, W) if need_state else (0,), dtype=wide)
    scale, shift, k, v0 = (_state(t, wide) for t in (scale, shift, k, v0))
    getattr(_lib(), f"plif_block_forward_{SUFFIX[y.dtype]}")(
        src.data_ptr(), scale.data_ptr(), shift.data_ptr(), k.data_ptr(), _ptr(v0), out.data_ptr(),
        place.data_ptr() if pool else None, v_last.data_ptr() if need_state else None, T, B, C, H, W, y_step,
        int(leak), int(hard), int(leak and k.numel() > 1), int(pool), float(v_th), float(v_reset),
        torch.get_num_threads())
    return out, place, v_last


@_forward.register_fake
def _(y, scale, shift, k, v0, leak, hard, v_th, v_reset, pool, need_state):
    shape = _pooled(y, pool)
    wide = state_dtype(y.dtype)
    return (y.new_empty(shape), y.new_empty(shape if pool else (0,), dtype=torch.uint8),
            y.new_empty(y.shape[1:] if need_state else (0,), dtype=wide))


@torch.library.custom_op("plif::cpu_block_backward", mutates_args=())
def _backward(y: Tensor, scale: Tensor, shift: Tensor, mean: Tensor, k: Tensor, v0: Tensor | None, place: Tensor,
              g_out: Tensor, g_v_last: Tensor | None, leak: bool, hard: bool, detach: bool, v_th: float,
              v_reset: float, sg_code: int, sg_a: float, sg_b: float, pool: bool, need_k: bool,
              sum_time: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """``(∂z [T, B, C, H, W], ...)``, or with ``sum_time`` ``Σ_t ∂z [1, B, C, H, W]`` in its place."""
    wide = state_dtype(y.dtype)
    T, B, C, H, W = y.shape
    src, y_step = _time_step(y)
    (scale, shift, mean, k), v0, g_v_last, g_out, place = _backward_inputs(y, (scale, shift, mean, k), v0, g_v_last,
                                                                          g_out, place)
    g_z = torch.empty((1, *y.shape[1:]) if sum_time else y.shape, dtype=wide)
    g_v0, g_k, sum_g, sum_gc = _backward_outputs(y, k)
    getattr(_lib(), f"plif_block_backward_{SUFFIX[y.dtype]}")(
        src.data_ptr(), scale.data_ptr(), shift.data_ptr(), mean.data_ptr(), k.data_ptr(), _ptr(v0),
        place.data_ptr() if pool else None, g_out.data_ptr(), _ptr(g_v_last), g_z.data_ptr(), g_v0.data_ptr(),
        g_k.data_ptr(), sum_g.data_ptr(), sum_gc.data_ptr(), T, B, C, H, W, y_step, int(leak), int(hard),
        int(detach), sg_code, int(leak and k.numel() > 1), int(need_k and leak), int(pool), int(sum_time),
        float(v_th), float(v_reset), float(sg_a), float(sg_b), torch.get_num_threads())
    return g_z, g_v0, g_k, sum_g, sum_gc


@_backward.register_fake
def _(y, scale, shift, mean, k, v0, place, g_out, g_v_last, leak, hard, detach, v_th, v_reset, sg_code, sg_a, sg_b,
      pool, need_k, sum_time=False):
    wide = state_dtype(y.dtype)
    C = y.shape[2]
    return (y.new_empty((1, *y.shape[1:]) if sum_time else y.shape, dtype=wide), y.new_empty(y.shape[1:], dtype=wide), k.new_empty(k.shape, dtype=wide),
            y.new_empty((C,), dtype=wide), y.new_empty((C,), dtype=wide))


@torch.library.custom_op("plif::cpu_block_backward_", mutates_args=("y",))
def _backward_into_y(y: Tensor, scale: Tensor, shift: Tensor, mean: Tensor, invstd: Tensor, k: Tensor,
                     v0: Tensor | None, place: Tensor, g_out: Tensor, g_v_last: Tensor | None, leak: bool, hard: bool,
                     detach: bool, v_th: float, v_reset: float, sg_code: int, sg_a: float, sg_b: float, pool: bool,
                     need_k: bool, training: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    T, B, C, H, W = y.shape
    (scale, shift, mean, invstd, k), v0, g_v_last, g_out, place = _backward_inputs(
        y, (scale, shift, mean, invstd, k), v0, g_v_last, g_out, place)
    g_v0, g_k, sum_g, sum_gc = _backward_outputs(y, k)
    getattr(_lib(), f"plif_block_backward_into_y_{SUFFIX[y.dtype]}")(
        y.data_ptr(), scale.data_ptr(), shift.data_ptr(), mean.data_ptr(), invstd.data_ptr(), k.data_ptr(), _ptr(v0),
        place.data_ptr() if pool else None, g_out.data_ptr(), _ptr(g_v_last), g_v0.data_ptr(), g_k.data_ptr(),
        sum_g.data_ptr(), sum_gc.data_ptr(), T, B, C, H, W, int(leak), int(hard), int(detach), sg_code,
        int(leak and k.numel() > 1), int(need_k and leak), int(pool), int(training), float(v_th), float(v_reset),
        float(sg_a), float(sg_b), torch.get_num_threads())
    return g_v0, g_k, sum_g, sum_gc


@_backward_into_y.register_fake
def _(y, scale, shift, mean, invstd, k, v0, place, g_out, g_v_last, leak, hard, detach, v_th, v_reset, sg_code, sg_a,
      sg_b, pool, need_k, training):
    wide = state_dtype(y.dtype)
    C = y.shape[2]
    return (y.new_empty(y.shape[1:], dtype=wide), k.new_empty(k.shape, dtype=wide), y.new_empty((C,), dtype=wide),
            y.new_empty((C,), dtype=wide))


def _input_grad(g_z: Tensor, y: Tensor, mean: Tensor, invstd: Tensor, scale: Tensor, sum_g: Tensor, sum_gc: Tensor,
                training: bool, g_y: Tensor) -> None:
    wide = g_z.dtype
    y = y.contiguous()
    T, B, C, H, W = y.shape
    args = [_state(t, wide) for t in (mean, invstd, scale, sum_g, sum_gc)]
    getattr(_lib(), f"plif_bn_input_grad_{SUFFIX[y.dtype]}")(
        g_z.data_ptr(), y.data_ptr(), *(t.data_ptr() for t in args), g_y.data_ptr(), T * B * C, C, H * W,
        int(training), torch.get_num_threads())


@torch.library.custom_op("plif::cpu_bn_input_grad", mutates_args=())
def _bn_input_grad(g_z: Tensor, y: Tensor, mean: Tensor, invstd: Tensor, scale: Tensor, sum_g: Tensor,
                   sum_gc: Tensor, training: bool) -> Tensor:
    g_z = g_z.contiguous()
    g_y = torch.empty(y.shape, dtype=y.dtype)
    _input_grad(g_z, y, mean, invstd, scale, sum_g, sum_gc, training, g_y)
    return g_y


@_bn_input_grad.register_fake
def _(g_z, y, mean, invstd, scale, sum_g, sum_gc, training):
    return y.new_empty(y.shape)


@torch.library.custom_op("plif::cpu_bn_input_grad_", mutates_args=("g_z",))
def _bn_input_grad_inplace(g_z: Tensor, y: Tensor, mean: Tensor, invstd: Tensor, scale: Tensor, sum_g: Tensor,
                           sum_gc: Tensor, training: bool) -> None:
    _input_grad(g_z, y, mean, invstd, scale, sum_g, sum_gc, training, g_z)


@torch.library.custom_op("plif::cpu_batch_stats", mutates_args=())
def _batch_stats(y: Tensor) -> tuple[Tensor, Tensor]:
    T, B, C, H, W = y.shape
    src, y_step = _time_step(y)
    mean, var = torch.empty(C, dtype=torch.float64), torch.empty(C, dtype=torch.float64)
    getattr(_lib(), f"plif_batch_stats_{SUFFIX[y.dtype]}")(
        src.data_ptr(), mean.data_ptr(), var.data_ptr(), T, B, C, H * W, y_step, torch.get_num_threads())
    return mean, var


@_batch_stats.register_fake
def _(y):
    return y.new_empty((y.shape[2],), dtype=torch.float64), y.new_empty((y.shape[2],), dtype=torch.float64)


# ------------------------------------------------------------------- the reference's signatures
def _flags(cfg: NeuronConfig) -> tuple:
    return bool(cfg.leak), bool(cfg.hard_reset), float(cfg.v_threshold), float(rest_potential(cfg))


def block_forward_cpu(y: Tensor, scale: Tensor, shift: Tensor, k: Tensor, v0: Tensor | None, cfg: NeuronConfig,
                      pool: bool, need_state: bool = False):
    """``(out, place, v_last)`` of :func:`plif.kernels.block_reference.block_forward_reference`."""
    return _forward(y, scale, shift, k.reshape(-1), v0, *_flags(cfg), bool(pool), bool(need_state))


def _surrogate(cfg: NeuronConfig) -> tuple:
    sg = get_surrogate(cfg.surrogate)
    if not sg.fused:
        raise ValueError(f"the cpu block kernel runs the closed-form surrogates only, not {cfg.surrogate!r}")
    return (sg.code, *sg.kernel_constants(float(cfg.alpha)))


def block_backward_cpu(y: Tensor, scale: Tensor, shift: Tensor, mean: Tensor, k: Tensor, v0: Tensor | None,
                       cfg: NeuronConfig, pool: bool, place: Tensor, g_out: Tensor, g_v_last: Tensor | None,
                       need_k: bool = True, sum_time: bool = False):
    """``(g_z, g_v0, g_k, sum_g, sum_gc)`` of :func:`plif.kernels.block_reference.block_backward_reference`.
    ``sum_time``: ``Σ_t ∂z [1, B, C, H, W]`` in place of ``∂z``, for a ``y`` repeated over time (a
    static input), whose gradient is that sum's; the kernel adds it up as it goes."""
    code, sg_a, sg_b = _surrogate(cfg)
    leak, hard, v_th, v_reset = _flags(cfg)
    g_z, g_v0, g_k, sum_g, sum_gc = _backward(y, scale, shift, mean, k.reshape(-1), v0, place, g_out, g_v_last,
                                              leak, hard, bool(cfg.detach_reset), v_th, v_reset, code, sg_a, sg_b,
                                              bool(pool), bool(need_k), bool(sum_time))
    return g_z, g_v0, g_k.reshape(k.shape), sum_g, sum_gc


def block_backward_summed_cpu(*args, **kwargs):
    """:func:`block_backward_cpu` with ``sum_time=True`` (the fused block's ``backward_summed``)."""
    return block_backward_cpu(*args, **kwargs, sum_time=True)


def block_backward_cpu_(y: Tensor, scale: Tensor, shift: Tensor, mean: Tensor, k: Tensor, v0: Tensor | None,
                        cfg: NeuronConfig, pool: bool, place: Tensor, g_out: Tensor, g_v_last: Tensor | None,
                        need_k: bool, invstd: Tensor, training: bool):
    """:func:`block_backward_cpu` and :func:`bn_input_grad_cpu` in one, ``∂y`` written over ``y``
    (contiguous): ``(g_y (= y), g_v0, g_k, sum_g, sum_gc)``, the same values, with no ``∂z`` tensor.
    The kernel runs the block's backward twice, first for the per-channel sums, then for ``∂y``."""
    code, sg_a, sg_b = _surrogate(cfg)
    leak, hard, v_th, v_reset = _flags(cfg)
    g_v0, g_k, sum_g, sum_gc = _backward_into_y(y, scale, shift, mean, invstd, k.reshape(-1), v0, place, g_out,
                                                g_v_last, leak, hard, bool(cfg.detach_reset), v_th, v_reset, code,
                                                sg_a, sg_b, bool(pool), bool(need_k), bool(training))
    return y, g_v0, g_k.reshape(k.shape), sum_g, sum_gc


def bn_input_grad_cpu(g_z: Tensor, y: Tensor, mean: Tensor, invstd: Tensor, scale: Tensor, sum_g: Tensor,
                      sum_gc: Tensor, training: bool) -> Tensor:
    """``∂L/∂y`` of :func:`plif.kernels.block_reference.bn_input_grad`, bit for bit on the same inputs."""
    return _bn_input_grad(g_z, y, mean, invstd, scale, sum_g, sum_gc, bool(training))


def bn_input_grad_cpu_(g_z: Tensor, y: Tensor, mean: Tensor, invstd: Tensor, scale: Tensor, sum_g: Tensor,
                       sum_gc: Tensor, training: bool) -> Tensor:
    """:func:`bn_input_grad_cpu` written over ``g_z`` (contiguous, ``y``'s dtype), which it returns:
    the fused block's backward needs no second full-size tensor.  While traced (torch.compile), the
    block backward's own output is taken as the contiguous tensor it always is: Dynamo cannot ask a
    tensor's layout in a backward it speculates (it retries, and a second compile in the process failed)."""
    if g_z.dtype != y.dtype or not (torch.compiler.is_compiling() or g_z.is_contiguous()):
        return bn_input_grad_cpu(g_z, y, mean, invstd, scale, sum_g, sum_gc, training)
    _bn_input_grad_inplace(g_z, y, mean, invstd, scale, sum_g, sum_gc, bool(training))
    return g_z


def batch_stats_cpu(y: Tensor) -> tuple[Tensor, Tensor]:
    """BatchNorm's batch statistics of ``y [T, B, C, H, W]`` over ``T·B·H·W`` per channel:
    ``(mean, biased variance)``, ``[C]`` float64 each (one pass in double, deterministic)."""
    return _batch_stats(y)


def cpu_block_supports(device: torch.device | str, dtype: torch.dtype) -> bool:
    """Whether the kernels take a ``y`` of this device and dtype: the CPU, fp32, fp64 or bf16 (not
    fp16: ``.half()`` or fp16 autocast).  Whether the library loaded is the caller's to know (the
    fused block lists these kernels once it did); this stays a test of two values, which a
    ``torch.compile`` trace reads without a lock or a build."""
    return torch.device(device).type == "cpu" and dtype in SUFFIX
