"""A network's first block, conv → BatchNorm → neuron [→ max-pool], run a few time-steps at a time.

At T = 20 on 128×128 event frames the first block's tensors are the largest of the network (the
convolution's output is ``[T·B, 128, 128, 128]``, 320 MB at B = 2), and its backward sets the
step's peak: the incoming gradient, the neuron's ``H``, its input gradient, the recomputed
convolution output and BatchNorm's input gradient are all that size.  Here nothing of that size
is ever alive.  Forward keeps only the block's input (the network's input, which the caller
holds anyway), BatchNorm's batch statistics and the neuron's state at the start of each chunk of
time-steps; backward replays each chunk from its state, last chunk first.  The first convolution
reads the few input channels of the sensor, so running it again is cheap.

BatchNorm's statistics are over all ``T·B`` samples, so the block makes several passes over the
chunks: forward one for the statistics and one to run the block; backward one for BatchNorm's
two gradient sums (``Σ∂z`` and ``Σ∂z·x̂``) and one for the input of the convolution's backward.

Not bit-identical to the plain layers: the statistics and the gradient sums are added chunk by
chunk (fp32 within a chunk, fp64 across chunks) and the convolution's weight gradient is summed
over chunks, so they differ from PyTorch's in the last bits (tests hold them to 1e-4 relative);
everything else is the same arithmetic.  Eager training only: in eval mode, without gradients,
under ``torch.compile`` or autocast the block's own layers run as they are.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["TimeChunkedBlock", "chunk_length"]


def chunk_length(T: int) -> int:
    """Time-steps per chunk: the ``T/c`` saved states stay alive through the next block's backward,
    while about four chunk-sized tensors (the neuron's input, ``H``, the gradient reaching the
    neuron and the one leaving it) are alive only during the chunk's replay; ``c ≈ √(T/3)`` (3 at
    T = 20) gave the lowest peak on the DVS128 Gesture network (measured: 2, 3 and 4)."""
    return max(1, round(math.sqrt(T / 3)))


def _chunks(T: int, c: int) -> list[tuple[int, int]]:
    return [(t0, min(t0 + c, T)) for t0 in range(0, T, c)]


def _affine(bn: nn.BatchNorm2d, mean, invstd):
    """``scale, shift`` with ``bn(y) = y * scale + shift`` for the batch statistics, ``[C, 1, 1]``."""
    scale = invstd if bn.weight is None else invstd * bn.weight
    shift = -mean * scale if bn.bias is None else bn.bias - mean * scale
    return scale.view(-1, 1, 1), shift.view(-1, 1, 1)


class _Block:
    """The layers and the arithmetic both passes share."""

    def __init__(self, conv: nn.Conv2d, bn: nn.BatchNorm2d, neuron: nn.Module, pool: nn.Module | None):
        self.conv, self.bn, self.neuron, self.pool = conv, bn, neuron, pool

    def conv_out(self, x: torch.Tensor) -> torch.Tensor:
        c = self.conv
        return F.conv2d(x, c.weight, None, c.stride, c.padding, c.dilation, c.groups)

    def spikes_out(self, s: torch.Tensor) -> torch.Tensor:
        """``s [n, B, ...]`` -> the block's output for those steps."""
        return s if self.pool is None else self.pool(s)


class _ChunkedFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, block, c, *params):
        T, B = x.shape[:2]
        bn, chunks = block.bn, _chunks(T, c)
        # pass 1: the batch statistics over all T·B samples (chunks combined in fp64)
        count, mean64, m2 = 0, None, None
        for t0, t1 in chunks:
            y = block.conv_out(x[t0:t1].flatten(0, 1))
            var_c, mean_c = torch.var_mean(y, dim=(0, 2, 3), correction=0)
            n = y.numel() // y.shape[1]
            del y
            if mean64 is None:
                mean64, m2 = mean_c.double(), var_c.double() * n
            else:
                delta = mean_c.double() - mean64
                mean64 = mean64 + delta * (n / (count + n))
                m2 = m2 + var_c.double() * n + delta.square() * (count * n / (count + n))
            count += n
        var64 = m2 / count
        mean, invstd = mean64.to(x.dtype), (var64 + bn.eps).rsqrt().to(x.dtype)
        m = bn.momentum
        bn.running_mean.mul_(1 - m).add_(mean64.to(bn.running_mean.dtype), alpha=m)
        bn.running_var.mul_(1 - m).add_((m2 / max(count - 1, 1)).to(bn.running_var.dtype), alpha=m)
        # pass 2: the block, chunk after chunk; the neuron's state at each chunk's start is kept
        scale, shift = _affine(bn, mean, invstd)
        out, starts, v = None, [], None
        for t0, t1 in chunks:
            z = block.conv_out(x[t0:t1].flatten(0, 1)).mul_(scale).add_(shift)
            starts.append(v)
            s, v = block.neuron(z.unflatten(0, (t1 - t0, B)), v0=v, return_state=True)
            o = block.spikes_out(s)
            if out is None:
                out = o.new_empty((T, *o.shape[1:]))
            out[t0:t1] = o
        ctx.save_for_backward(x, mean, invstd)
        ctx.block, ctx.c, ctx.starts = block, c, starts
        return out

    @staticmethod
    def backward(ctx, g_out):
        x, mean, invstd = ctx.saved_tensors
        block, c, starts = ctx.block, ctx.c, ctx.starts
        need = ctx.needs_input_grad
        n_in = len(need)
        if g_out is None:
            return (None,) * n_in
        g_out = g_out.contiguous()
        bn, conv = block.bn, block.conv
        nparams = list(block.neuron.parameters())
        trained = [p for p, want in zip(nparams, need[n_in - len(nparams):]) if want]
        scale, shift = _affine(bn, mean, invstd)
        scale, shift = scale.detach(), shift.detach()
        # pass A: BatchNorm's gradient sums Σ∂z and Σ∂z·x̂, and the neuron's parameter gradients
        sum_g = sum_gx = 0
        count = 0
        g_np = [None] * len(trained)
        for _, _, g_z, xhat, g_p in _replay(block, x, starts, c, g_out, scale, shift, mean, invstd, trained):
            sum_g = sum_g + g_z.sum((0, 2, 3), dtype=torch.float64)
            sum_gx = sum_gx + (g_z * xhat).sum((0, 2, 3), dtype=torch.float64)
            count += g_z.numel() // g_z.shape[1]
            g_np = [b if a is None else (a if b is None else a + b) for a, b in zip(g_np, g_p)]
            del g_z, xhat
        mean_g = (sum_g / count).to(x.dtype).view(-1, 1, 1)
        mean_gx = (sum_gx / count).to(x.dtype).view(-1, 1, 1)
        gain = scale  # invstd * gamma
        # pass B: ∂L/∂y chunk by chunk, into the convolution's backward
        g_x = torch.zeros_like(x) if need[0] else None
        g_w = None
        args = (list(conv.stride), list(conv.padding), list(conv.dilation), False, [0, 0], conv.groups)
        for t0, t1, g_z, xhat, _ in _replay(block, x, starts, c, g_out, scale, shift, mean, invstd, []):
            g_y = g_z.sub_(mean_g).sub_(xhat.mul_(mean_gx)).mul_(gain)
            del g_z, xhat
            xc = x[t0:t1].flatten(0, 1)
            gx_c, gw_c, _ = torch.ops.aten.convolution_backward(g_y, xc, conv.weight, None, *args,
                                                                [need[0], need[3], False])
            if need[0]:
                g_x[t0:t1] = gx_c.unflatten(0, (t1 - t0, x.shape[1]))
            if need[3]:
                g_w = gw_c if g_w is None else g_w.add_(gw_c)
            del g_y, gx_c, gw_c
        grads = [g_x, None, None, g_w]
        if bn.weight is not None:
            grads.append(sum_gx.to(bn.weight.dtype) if need[len(grads)] else None)
        if bn.bias is not None:
            grads.append(sum_g.to(bn.bias.dtype) if need[len(grads)] else None)
        got = iter(g_np)
        grads += [next(got) if want else None for want in need[len(grads):]]
        return tuple(grads)


def _replay(block, x, starts, c, g_out, scale, shift, mean, invstd, trained):
    """Backward through the neuron and the pool, chunk by chunk, last chunk first: yields
    ``(t0, t1, ∂L/∂z [n·B, C, H, W], x̂, parameter gradients)``.  Each chunk's forward is run
    again from the neuron's state at its start, so its spikes are those of the forward pass."""
    T, B = x.shape[:2]
    chunks = _chunks(T, c)
    g_v = None
    for i in reversed(range(len(chunks))):
        t0, t1 = chunks[i]
        xc = x[t0:t1].flatten(0, 1)
        with torch.no_grad():
            y = block.conv_out(xc).mul_(scale)
        # z = y·scale + shift as forward computed it, but made from a [C, 1, 1] leaf so that z is not
        # a leaf: nothing keeps it once the neuron (which saves only H) has read it; ∂L/∂z is
        # caught by a hook on its way to the leaf
        shift_leaf = shift.detach().requires_grad_(True)
        caught = []
        v0 = None if starts[i] is None else starts[i].detach().requires_grad_(True)
        with torch.enable_grad():
            z = y.add(shift_leaf)
            del y
            z.register_hook(caught.append)
            s, v_last = block.neuron(z.unflatten(0, (t1 - t0, B)), v0=v0, return_state=True)
            del z
            o = block.spikes_out(s)
        del s
        outs, grads = [o], [g_out[t0:t1]]
        if g_v is not None:
            outs.append(v_last)
            grads.append(g_v)
        inputs = [shift_leaf] + ([v0] if v0 is not None else []) + list(trained)
        got = torch.autograd.grad(outs, inputs, grads, allow_unused=True)
        del outs, grads, o, v_last, inputs
        got = (caught.pop(),) + got[1:]
        g_v = got[1] if v0 is not None else None
        with torch.no_grad():  # x̂ = (y - mean)·invstd, from the convolution run once more (cheap: few input channels)
            xhat = block.conv_out(xc).sub_(mean.view(-1, 1, 1)).mul_(invstd.view(-1, 1, 1))
        yield t0, t1, got[0], xhat, got[len(got) - len(trained):]
        del got, xhat  # before the next chunk is replayed


class TimeChunkedBlock:
    """Run ``layers`` (conv, BatchNorm2d, neuron and an optional max-pool, all over ``[T, B, ...]``)
    in chunks of time-steps in training; ``fallback`` is the plan of steps used otherwise.

    Not an ``nn.Module``: it holds layers the network already owns (same state dict, same
    ``.train()/.to()``), as the other steps of a memory plan do."""

    def __init__(self, layers: list[nn.Module], fallback: list):
        conv, bn, neuron = layers[0].layer, layers[1].layer, layers[2]
        self.layers, self.fallback = layers, fallback
        self.block = _Block(conv, bn, neuron, layers[3] if len(layers) > 3 else None)

    def _plain(self, x: torch.Tensor, start: int) -> torch.Tensor:
        for first, end, step in self.fallback:
            if end <= start:
                continue
            x = step(x, start - first) if first < start else step(x)
        return x

    def __call__(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        b = self.block
        if (start != 0 or not (b.bn.training and b.conv.training) or not torch.is_grad_enabled()
                or torch.compiler.is_compiling() or torch.is_autocast_enabled(x.device.type)
                or x.dtype not in (torch.float32, torch.float64)):
            return self._plain(x, start)
        b.bn.num_batches_tracked.add_(1)
        params = [b.conv.weight, *(p for p in (b.bn.weight, b.bn.bias) if p is not None),
                  *b.neuron.parameters()]
        return _ChunkedFunction.apply(x, b, chunk_length(x.shape[0]), *params)

    def __repr__(self) -> str:
        return f"TimeChunkedBlock({', '.join(type(m).__name__ for m in self.layers)})"
