"""The default training path given inputs as a user's code makes them (issue 45.1): a first
convolution with few taps (one or two input channels, the CPU) fed a transposed, strided, sliced,
channels-last, batch-first or time-expanded tensor, or padding by itself (``reflect``, ...), under
``--memory fused``, ``exact`` and ``low``, against the composed layers (``--memory none``).

Each case is ``python -c`` in a fresh process: one training step's outputs and every gradient are
compared, and the case prints ``agree`` or what differs (the check turns the latter into a problem).
"""
from __future__ import annotations

from .case import Case

AREA = "layouts"

PRELUDE = """
import copy
import torch
from plif.models import build_network
from plif.models.memory import MEMORY_PRESETS
torch.manual_seed(0)
C = {channels}
net = build_network("c8k3s1-BN-PLIF-MPk2s2-c8k3s1-BN-PLIF-FC10", (C, 8, 8), 3, memory=MEMORY_PRESETS["{preset}"],
                    v_threshold=0.3)
net.layers[0].layer.padding_mode = "{mode}"
composed = copy.deepcopy(net).set_memory(MEMORY_PRESETS["none"])
g = torch.Generator().manual_seed(1)
x = {layout}
results = []
for n in (net, composed):
    out = n(x)
    (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
    results.append((out.detach(), {{k: p.grad for k, p in n.named_parameters()}}))
(o1, g1), (o0, g0) = results
bad = [k for k in g0 if (g1[k] - g0[k]).abs().max() > 1e-4 * g0[k].abs().max().clamp_min(1e-6)]
print("agree" if torch.equal(o1, o0) and not bad else f"differ: outputs equal {{torch.equal(o1, o0)}}, gradients {{bad}}")
"""

LAYOUTS = {  # name -> (input channels, the [T=3, B=4, C, 8, 8] input)
    "contiguous": (1, "torch.rand(3, 4, C, 8, 8, generator=g)"),
    "transposed": (1, "torch.rand(3, 4, C, 8, 8, generator=g).transpose(-1, -2)"),
    "strided": (1, "torch.rand(3, 4, C, 16, 16, generator=g)[..., ::2, ::2]"),
    "sliced": (1, "torch.rand(3, 5, C + 1, 10, 9, generator=g)[:, 1:, 1:, 1:-1, :8]"),
    "channels-last": (2, "torch.rand(12, C, 8, 8, generator=g).contiguous(memory_format=torch.channels_last)"
                         ".unflatten(0, (3, 4))"),
    "batch-first": (1, "torch.rand(4, 3, C, 8, 8, generator=g).transpose(0, 1)"),
    "expanded": (1, "torch.rand(1, 4, C, 8, 8, generator=g).expand(3, 4, C, 8, 8)"),
}


def _case(layout: str, preset: str, mode: str = "zeros") -> Case:
    channels, x = LAYOUTS[layout]
    code = PRELUDE.format(channels=channels, preset=preset, mode=mode, layout=x)

    def run(env):
        return env.python(code)

    def check(tmp, r):
        return None if "agree" in r.stdout else f"the fused path differs from --memory none: {r.stdout.strip()[:200]}"

    name = f"layout-{layout}-{preset}" + ("" if mode == "zeros" else f"-{mode}")
    return Case(name, AREA, run=run, check=check, expect="ok")


CASES = ([_case(layout, preset) for layout in LAYOUTS for preset in ("fused", "exact", "low")]
         + [_case("contiguous", preset, mode) for mode in ("reflect", "circular", "replicate")
            for preset in ("fused", "exact")])
