"""A network's first block, conv → BatchNorm → neuron [→ max-pool], run a few time-steps at a time.

At T = 20 on 128×128 event frames the first block's tensors are the largest of the network (the
convolution's output is ``[T·B, 128, 128, 128]``, 320 MB at B = 2), and its backward sets the
step's peak: the incoming gradient, the neuron's ``H``, its input gradient, the recomputed
convolution output and BatchNorm's input gradient are all that size.  Here nothing of that size
is ever alive.  Forward keeps only the block's input (the network's input, which the caller
holds anyway), BatchNorm's batch statistics and the neuron's state at the start of each chunk of
time-steps; backward replays each chunk from its state, last chunk first.  The first convolution
reads the few input channels of the sensor, so running it again is cheap.

BatchNorm's statistics are over all ``T·B`` samples, so forward makes two passes over the chunks
(the statistics, then the fused block's kernel per chunk, carrying the neuron's state from one
chunk to the next); backward replays each chunk once, the kernels writing the chunk's own BatchNorm
input gradient over its recomputed convolution output and carrying ``∂V`` back to the chunk
before, and gathers BatchNorm's two gradient sums and the convolution's weight gradient chunk by
chunk (see :class:`_ChunkedFunction` for the algebra that makes one replay enough), and a second
time only when the block's input needs a gradient.  On DVS128 Gesture (T = 20, B = 2, chunks of 5
steps, the neuron's state kept at 3 chunk starts) the step's live peak was 845 MB of resident memory
against 876 for ``exact`` and for the fused default (which makes a few-tap first convolution's output
again in backward) and 2,666 for the naive loop (``plif bench memory``; 380 MB of it is the process
before the first step).

Not bit-identical to the plain layers: the statistics and the gradient sums are added chunk by
chunk (fp32 within a chunk, fp64 across chunks), so they differ from PyTorch's in the last bits
(full-size DVS128 Gesture: the first conv's weight gradient 2.6e-5 relative, BatchNorm's and τ's
below 1e-6; tests hold narrow networks to 1e-4); the spikes are those of the plain layers unless
a potential lies within rounding of the threshold.  Eager training only: in eval mode, without
gradients, under ``torch.compile`` or autocast, for a static input (whose first convolution runs
once, before the repeat over T), or where the fused block would not run (a hook on one of its
layers, a dtype or neuron its kernels do not take), the block runs as the plan without chunking
runs it: the fused block (:class:`~plif.layers.fused_block.FusedBlock`), or its composed layers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from ..kernel_table import load_ahead
from ..neurons.functional import NeuronConfig
from .fused_block import bn_affine, BlockConv, record_statistics, BlockKernels, fused_route, load_kernels
from .spike_input import conv_args

__all__ = ["TimeChunkedBlock", "chunk_length"]


def chunk_length(T: int) -> int:
    """Time-steps per chunk, ``⌈√T⌉``: the ``T/c`` saved states stay alive through the next block's
    backward, while a few chunk-sized tensors (the neuron's input, ``H``, the gradient reaching the
    neuron and the one leaving it) are alive only during a chunk's replay.  On DVS128 Gesture at
    T = 20, B = 2 the live peak RSS was 954, 922 and 913 MB for c = 3, 4 and 5."""
    return max(1, math.ceil(math.sqrt(T)))


def _chunks(T: int, c: int) -> list[tuple[int, int]]:
    return [(t0, min(t0 + c, T)) for t0 in range(0, T, c)]


@dataclass(frozen=True)
class _Block:
    """The layers, flags, kernels and convolution both passes of one call share: made per call (the
    kernels and the convolution are chosen for its input) and kept by its backward, so a second
    forward before that backward changes nothing it reads."""

    conv: nn.Conv2d
    bn: nn.BatchNorm2d
    cfg: NeuronConfig
    pool: bool
    kernels: BlockKernels
    op: BlockConv

    def conv_out(self, x: torch.Tensor) -> torch.Tensor:
        """The convolution of ``x [n, B, C, H, W]`` -> ``[n, B, C', H', W']``, without autograd."""
        with torch.no_grad():
            return self.op(x, self.conv.weight)

    def weight_grad(self, g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``∂L/∂weight`` of the bias-free convolution for output gradient ``g`` and input ``x``, fp64."""
        return self.op.grads(g, lambda: x, x.shape, self.conv.weight, (False, True))[1].double()

    def input_grad(self, g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``∂L/∂x`` of the convolution for output gradient ``g`` and input ``x`` (only its shape is
        read, but the few-tap kernel's backward takes the tensor)."""
        return self.op.grads(g, lambda: x, x.shape, self.conv.weight, (True, False))[0]


def _per_channel(v: torch.Tensor) -> torch.Tensor:
    """A ``[O]`` vector against a weight ``[O, C, k, k]``."""
    return v.view(-1, 1, 1, 1)


def _channel(v: torch.Tensor) -> torch.Tensor:
    """A ``[C]`` vector against an activation ``[n, B, C, H, W]``."""
    return v.view(-1, 1, 1)


class _ChunkedFunction(torch.autograd.Function):
    """Gradients through BatchNorm's batch statistics without its input or output whole.

    With ``x̂ = (y - μ)·r`` (``r`` = invstd), ``z = γ x̂ + β`` and ``∂z`` the gradient reaching the
    neuron, BatchNorm's backward is ``∂y = γ r (∂z - mean(∂z) - x̂ · mean(∂z x̂))`` per channel, and
    the two means are over all chunks.  The weight's gradient is linear in ``∂y``, and the
    convolution's weight gradient ``W(g, x)`` of output channel ``o`` reads only ``g[:, o]``, so each
    chunk ``c`` contributes ``W(γ r (∂z_c - m_c - x̂_c k_c), x_c)`` with its own means ``m_c = mean(∂z_c)``
    and ``k_c = mean(∂z_c x̂_c)`` (the fused block's ``bn_input_grad`` on the chunk), and the difference
    to the global means is added at the end through ``B_c = W(1, x_c)`` and ``C_c = W(x̂_c, x_c)``
    (small, ``[O, C, k, k]``).  So backward replays each chunk once; a second replay runs only when
    the block's input needs a gradient.  Inputs ``(x, block, c, weight, γ, β, k)``.
    """

    @staticmethod
    def forward(ctx, x, block, c, weight, gamma, beta, k):
        T, B = x.shape[:2]
        bn, chunks, kernels = block.bn, _chunks(T, c), block.kernels
        # pass 1: the batch statistics over all T·B samples (chunks combined in fp64)
        count, mean64, m2 = 0, None, None
        for t0, t1 in chunks:
            y = block.conv_out(x[t0:t1])
            mean_c, var_c = (t.double() for t in kernels.stats(y))
            n = y.numel() // y.shape[2]
            del y
            if mean64 is None:
                mean64, m2 = mean_c, var_c * n
            else:
                delta = mean_c - mean64
                mean64 = mean64 + delta * (n / (count + n))
                m2 = m2 + var_c * n + delta.square() * (count * n / (count + n))
            count += n
        mean, invstd = record_statistics(bn, mean64, m2 / count, m2 / max(count - 1, 1), x.dtype)
        # pass 2: the fused block, chunk after chunk; the neuron's state at each chunk's start is kept
        scale, shift = bn_affine(gamma, beta, mean, invstd)
        out = place = None
        starts, v = [], None
        for t0, t1 in chunks:
            y = block.conv_out(x[t0:t1])
            starts.append(v)
            o, pl, v = kernels.forward(y, scale, shift, k, v, block.cfg, block.pool, True)
            del y
            if out is None:
                out = o.new_empty((T, *o.shape[1:]))
                place = pl.new_empty((T, *pl.shape[1:])) if block.pool else pl
            out[t0:t1] = o
            if block.pool:
                place[t0:t1] = pl
        ctx.save_for_backward(x, weight, gamma, mean, invstd, scale, shift, k, place)
        ctx.block, ctx.c, ctx.starts, ctx.beta_dtype = block, c, starts, None if beta is None else beta.dtype
        ctx.mark_non_differentiable(place)
        return out, place

    @staticmethod
    def backward(ctx, g_out, _g_place):
        x, weight, gamma, mean, invstd, scale, shift, k, place = ctx.saved_tensors
        block, c, starts = ctx.block, ctx.c, ctx.starts
        need = ctx.needs_input_grad
        if g_out is None:
            return (None,) * len(need)
        g_out = g_out.contiguous()
        kernels, conv = block.kernels, block.conv
        need_k = bool(need[6] and block.cfg.leak)
        # the one replay: Σ∂z, Σ∂z·(y - μ), ∂k, and the chunks' terms of the weight's gradient.  Where the
        # kernels write ∂y over y, the chunk's own ∂y (its means, the local term) replaces y, and
        # C_c = W(x̂_c, x_c) = r·(W(y_c, x_c) − μ·B_c) is taken from y just before
        into = bool(need[3]) and kernels.backward_into is not None
        taps: dict = {}

        def before(t0, t1, y):
            xc = x[t0:t1].flatten(0, 1)
            taps["b"] = b_c = _tap_sums(block, xc, y.shape[-2:])
            taps["c"] = _per_channel(invstd.double()) * (block.weight_grad(y.flatten(0, 1), xc)
                                                         - _per_channel(mean.double()) * b_c)

        sum_g = sum_gc = g_k = 0
        count, a_w, terms = 0, 0, []
        for t0, t1, y, g_z, sums in _replay(block, x, starts, c, g_out, place, scale, shift, mean, k, need_k,
                                            invstd if into else None, before if into else None):
            xc = x[t0:t1].flatten(0, 1)
            n = y.numel() // y.shape[2]
            s_g, s_gc, s_k = sums
            sum_g, sum_gc, g_k, count = sum_g + s_g.double(), sum_gc + s_gc.double(), g_k + s_k.double(), count + n
            if need[3]:
                m_c, k_c = s_g.double() / n, invstd.double() * s_gc.double() / n
                if into:
                    a_w = a_w + block.weight_grad(y.flatten(0, 1), xc)  # y holds the chunk's ∂y now
                    terms.append((m_c, k_c, taps.pop("b"), taps.pop("c")))
                else:
                    local = (kernels.input_grad_into or kernels.input_grad)(g_z, y, mean, invstd, scale, s_g, s_gc,
                                                                             True)
                    a_w = a_w + block.weight_grad(local.flatten(0, 1), xc)
                    del local, g_z
                    xhat = y.sub_(_channel(mean)).mul_(_channel(invstd))  # y is not needed any more
                    b_c = _tap_sums(block, xc, y.shape[-2:])
                    terms.append((m_c, k_c, b_c, block.weight_grad(xhat.flatten(0, 1), xc)))
                    del xhat
            del y
        mean_g, mean_gx = sum_g / count, invstd.double() * sum_gc / count
        g_w = None
        if need[3]:
            for m_c, k_c, b_c, c_c in terms:
                a_w = a_w + _per_channel(scale.double()) * (_per_channel(m_c - mean_g) * b_c
                                                            + _per_channel(k_c - mean_gx) * c_c)
            g_w = a_w.to(conv.weight.dtype)
        g_x = None
        if need[0]:  # a second replay for ∂y itself, chunk by chunk, into the convolution's input gradient
            g_x = torch.empty_like(x)
            mg, mgx = (_channel(v.to(x.dtype)) for v in (mean_g, mean_gx))
            for t0, t1, y, g_z, _ in _replay(block, x, starts, c, g_out, place, scale, shift, mean, k, False):
                xhat = y.sub_(_channel(mean)).mul_(_channel(invstd))
                g_y = g_z.sub_(mg).sub_(xhat.mul_(mgx)).mul_(_channel(scale))
                del g_z, xhat, y
                xc = x[t0:t1].flatten(0, 1)
                g_x[t0:t1] = block.input_grad(g_y.flatten(0, 1), xc).unflatten(
                    0, (t1 - t0, x.shape[1]))
                del g_y
        g_gamma = (invstd.double() * sum_gc).to(gamma.dtype) if need[4] else None
        g_beta = sum_g.to(ctx.beta_dtype) if need[5] else None
        g_k = g_k.to(k.dtype).reshape(k.shape) if need_k else None
        return g_x, None, None, g_w, g_gamma, g_beta, g_k


def _tap_sums(block: _Block, x: torch.Tensor, size: torch.Size) -> torch.Tensor:
    """``W(1, x)`` for ``x [N, C, H, W]`` and the convolution's output ``size`` ``(H', W')``: the weight
    gradient for an output gradient of ones, which is linear in the input, so one call on the input
    summed over its ``N`` samples; fp64."""
    xs = x.sum(0, keepdim=True)
    return block.weight_grad(xs.new_ones((1, block.conv.out_channels, *size)), xs)


def _replay(block, x, starts, c, g_out, place, scale, shift, mean, k, need_k, invstd=None, before=None):
    """Backward through the fused neuron and pool, chunk by chunk, last chunk first: yields
    ``(t0, t1, y, ∂L/∂z, (Σ∂z, Σ∂z(y - μ), ∂k))`` for each chunk, ``y`` (the convolution's output,
    recomputed) and ``∂z`` ``[n, B, C, H, W]``.  With ``invstd`` the kernels write the chunk's own
    BatchNorm input gradient (its means, not the global ones) over ``y`` and ``∂z`` is None;
    ``before(t0, t1, y)`` sees ``y`` first.  The neuron's state at each chunk's start gives the
    chunk's forward again, so its spikes are those of the forward pass; ``∂V`` at a chunk's start is
    carried to the chunk before it."""
    T = x.shape[0]
    chunks = _chunks(T, c)
    g_v = None
    for i in reversed(range(len(chunks))):
        t0, t1 = chunks[i]
        y = block.conv_out(x[t0:t1])
        pl = place[t0:t1] if block.pool else place
        args = (scale, shift, mean, k, starts[i], block.cfg, block.pool, pl, g_out[t0:t1], g_v, need_k)
        if invstd is not None:
            before(t0, t1, y)
            y, g_v, g_k, s_g, s_gc = block.kernels.backward_into(y, *args, invstd, True)
            g_z = None
        else:
            g_z, g_v, g_k, s_g, s_gc = block.kernels.backward(y, *args)
        yield t0, t1, y, g_z, (s_g, s_gc, g_k)
        del y, g_z  # before the next chunk is replayed


class TimeChunkedBlock:
    """Run ``layers`` (conv, BatchNorm2d, IF/LIF/PLIF and an optional 2×2 max-pool, all over
    ``[T, B, ...]``) in chunks of time-steps in training, each chunk through the fused block's
    kernels (:mod:`plif.layers.fused_block`); ``fallback(x, start)`` runs them otherwise.

    Not an ``nn.Module``: it holds layers the network already owns (same state dict, same
    ``.train()/.to()``), as the other steps of a memory plan do."""

    def __init__(self, layers: list[nn.Module], fallback):
        self.conv, self.bn, self.neuron = layers[0].layer, layers[1].layer, layers[2]
        self.layers, self._plain, self.pool = layers, fallback, len(layers) > 3
        self.cfg, self._conv_args = self.neuron.cfg, tuple(conv_args(self.conv))
        load_ahead(load_kernels)  # now, never inside a torch.compile trace

    def __call__(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        conv, bn = self.conv, self.bn
        # the cheap flags first: the fused path's own predicate only where they decide
        if (start != 0 or not conv.training or not torch.is_grad_enabled()
                or torch.compiler.is_compiling() or torch.is_autocast_enabled(x.device.type)
                or x.dtype not in (torch.float32, torch.float64)
                or (route := fused_route(self.layers, x)) is None):
            return self._plain(x, start)
        b = _Block(conv, bn, self.cfg, self.pool, route.kernels, BlockConv(self._conv_args, False, route.few))
        # k as the neuron makes it (sigmoid(w) for PLIF), from an empty tensor with the block's channels
        k = self.neuron.k(x.new_empty((0, 0, conv.out_channels, 0, 0))).reshape(-1)
        return _ChunkedFunction.apply(x, b, chunk_length(x.shape[0]), conv.weight, bn.weight, bn.bias, k)[0]

    def __repr__(self) -> str:
        return f"TimeChunkedBlock({', '.join(type(m).__name__ for m in self.layers)})"
