"""The autograd contract both max-pooling operators share (``plif::spike_max_pool2d`` and
``plif::cpu_max_pool2d``): forward ``(x [N, C, H, W], k, s) -> (pooled, where)``, ``where`` saying
which element of each window was chosen (not differentiable), and backward
``(∂pooled, where, H, W, k, s) -> ∂x``."""
from __future__ import annotations

__all__ = ["pooled_size", "register_pool_autograd"]


def pooled_size(size: int, k: int, s: int) -> int:
    """Outputs along one side of a ``k``-wide window every ``s`` (no padding)."""
    return (size - k) // s + 1


def register_pool_autograd(forward_op, backward_op) -> None:
    """Give ``forward_op`` (a ``torch.library`` custom op) its backward through ``backward_op``,
    keeping only ``where`` for it."""

    def setup(ctx, inputs, output):
        x, k, s = inputs
        ctx.mark_non_differentiable(output[1])
        ctx.set_materialize_grads(False)  # no zero gradient for ``where`` (nor a pooled output left unused)
        ctx.save_for_backward(output[1])
        ctx.hw, ctx.k, ctx.s = (x.shape[-2], x.shape[-1]), k, s

    def backward(ctx, grad, _grad_where):
        if grad is None:  # the pooled values did not reach the loss
            return None, None, None
        (where,) = ctx.saved_tensors
        return backward_op(grad, where, *ctx.hw, ctx.k, ctx.s), None, None

    forward_op.register_autograd(backward, setup_context=setup)
