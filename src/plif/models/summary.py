"""A layer table for a built network: output shape, parameters and spiking neurons per layer."""
from __future__ import annotations

from .network import SpikingNetwork

__all__ = ["layer_table"]


def layer_table(net: SpikingNetwork) -> str:
    """``net``'s layers as a text table (output shape, parameters, spiking neurons) with totals;
    shapes are per time-step and per sample (``[C, H, W]`` or ``[N]``)."""
    rows = [("#", "layer", "output [C,H,W]/[N]", "params", "neurons")]
    rows.append(("", "input", "x".join(map(str, net.input_shape)), "", ""))
    for i, l in enumerate(net.info):
        rows.append((str(i), l.token, "x".join(map(str, l.out_shape)), f"{l.params:,}", f"{l.neurons:,}" if l.neurons else ""))
    total_p = sum(p.numel() for p in net.parameters())
    total_n = sum(l.neurons for l in net.info)
    rows.append(("", "total", "", f"{total_p:,}", f"{total_n:,}"))
    widths = [max(len(r[c]) for r in rows) for c in range(5)]
    align = ["<", "<", "<", ">", ">"]
    lines = []
    for j, r in enumerate(rows):
        lines.append("  ".join(f"{v:{a}{w}}" for v, a, w in zip(r, align, widths)).rstrip())
        if j == 0 or j == len(rows) - 2:
            lines.append("  ".join("-" * w for w in widths))
    head = f"network: {net.spec}\nT = {net.T}, input {tuple(net.input_shape)}, output [T, B, {net.info[-1].out_shape[0]}]"
    return head + "\n" + "\n".join(lines)
