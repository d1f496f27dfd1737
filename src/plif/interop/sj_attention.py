"""SpikingJelly 2.0's attention layers (``layer.attention``) as plif's (:mod:`plif.layers.attention`).

Each is replaced after its children were converted (the 1x1 ``Conv1d``/``Conv2d`` and BatchNorm time-folded,
the neurons plif's), by plif's layer of the same math holding those children under the same names:

    SpikingSelfAttention                    -> SpikingSelfAttention (its ``scale``)
    QKAttention, TokenQKAttention,
    ChannelQKAttention                      -> QKAttention (``kind`` its ``qka_type``)
    SpikeDrivenSelfAttention                -> SpikeDrivenSelfAttention

Their products of spikes are computed in SpikingJelly's order (``(v kᵀ) q · scale``, the same sums), so in
float64 the outputs are the same numbers.  A subclass (which may change ``forward``) is not one of them: it
stays, its own ``forward`` running on the converted children, as any container's does.
"""
from __future__ import annotations

import torch
from torch import nn

from ..layers.attention import QKAttention, SpikeDrivenSelfAttention, SpikingSelfAttention

__all__ = ["convert_attention", "ATTENTION"]

ATTENTION = ("SpikingSelfAttention", "QKAttention", "TokenQKAttention", "ChannelQKAttention",
             "SpikeDrivenSelfAttention")
"""SpikingJelly's attention layers (``spikingjelly.activation_based.layer.attention``) converted exactly."""


def _plif_twin(m):
    name = type(m).__name__
    if name == "SpikingSelfAttention":
        return SpikingSelfAttention(m.dim, m.num_heads, scale=float(m.scale))
    if name == "SpikeDrivenSelfAttention":
        return SpikeDrivenSelfAttention(m.dim, m.num_heads)
    return QKAttention(m.dim, m.num_heads, m.qka_type)


def convert_attention(m: nn.Module, path: str, refuse):
    """plif's attention layer in place of SpikingJelly's ``m`` (its children converted already), holding
    ``m``'s children; ``None`` when ``m`` is none of :data:`ATTENTION`."""
    from spikingjelly.activation_based.layer import attention

    name = type(m).__name__
    if name not in ATTENTION or type(m) is not getattr(attention, name, None):
        return None
    try:
        with torch.device("meta"):  # its layers are m's: nothing of the twin's own is kept
            out = _plif_twin(m)
    except ValueError as e:
        refuse(path, name, str(e))
    if set(out._modules) != set(m._modules):
        refuse(path, name, f"has the submodules {sorted(m._modules)}, not SpikingJelly's {sorted(out._modules)}")
    for key in out._modules:
        out._modules[key] = m._modules[key]
    out.train(m.training)
    return out
