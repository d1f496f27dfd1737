"""Keep a neuron layer's saved potentials ``H [T, B, ...]`` in bfloat16 instead of fp32.

The fused neurons save only ``H_t`` for backward; this halves it.  It wraps any neuron layer
(any backend) with ``torch.autograd.graph.saved_tensors_hooks``: a saved fp32 tensor of the
layer's input shape ``[T, B, ...]`` (that is ``H``) is stored rounded to bf16 and widened back
in backward; smaller saved tensors (``V_{-1}``, ``k``) are kept as they are.

Not exact: backward sees ``H`` rounded to 8 significant bits, so a potential within bf16 rounding
of the threshold may be counted on the other side of it when the spike is recomputed (the Triton
kernel's ``h_dtype=torch.bfloat16`` makes the same trade).  On narrow versions of the six zoo
networks the weight and BN gradients stay within 3.1% (relative L2) of fp32 and PLIF's ``w``
gradient within 6.1% (it sums ``g_H (H - V_prev)``, where rounding cancels least); the tests hold
them to 5% and 10%.  On the CPU the widened copy and the fp32 original briefly coexist, so the
step's *peak* does not drop (``docs/lab/memory.md``).  Eager mode only: under ``torch.compile`` the
layer runs unchanged.  Under bf16 autocast the layer's input is bf16 while the fused kernels
keep ``H`` in fp32, so ``H`` is narrowed there too.
"""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["BF16SavedPotential"]

_NARROWED = (torch.float32, torch.bfloat16)  # inputs whose neurons save an fp32 H (bf16: under autocast)


class BF16SavedPotential:
    """Call ``neuron(x)`` with its ``[T, B, ...]``-shaped saved tensors kept in bf16.

    Not an ``nn.Module`` on purpose: it holds a reference to a layer the network already owns, so
    the state dict and ``.train()/.to()`` are those of the wrapped layer.
    """

    def __init__(self, neuron: nn.Module):
        self.neuron = neuron

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling() or not torch.is_grad_enabled() or x.dtype not in _NARROWED:
            return self.neuron(x)
        shape = x.shape

        def pack(t: torch.Tensor):
            if t.dtype == torch.float32 and t.shape == shape:
                return True, t.to(torch.bfloat16)
            return False, t

        def unpack(packed):
            narrowed, t = packed
            return t.to(torch.float32) if narrowed else t

        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            return self.neuron(x)

    def __repr__(self) -> str:
        return f"BF16SavedPotential({self.neuron.__class__.__name__})"
