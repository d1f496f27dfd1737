"""``plif.fuse`` on models written by hand (issue 53): a max-pool of any window, stride, padding,
dilation or ``ceil_mode`` after a fused block or a neuron computes what ``nn.MaxPool2d`` as written
computes in every memory mode that fuses or keeps spikes; a backward hook on a fused run's layers
fires; a slice of a fused ``nn.Sequential`` runs; ``fuse`` / ``fused_blocks`` given no module, and
``from_spikingjelly`` given a neuron called twice, refuse in one line.

Each case is ``python -c`` in a fresh process; a ``TypeError`` / ``ValueError`` is printed as one
``python: error:`` line (exit 2), a comparison prints ``agree`` or what differs.
"""
from __future__ import annotations

import importlib.util

from .case import Case, SkipCase

AREA = "fuse"

PRELUDE = """
import copy
import sys
import torch
from torch import nn
import plif
from plif.layers import TimeFolded
torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self, pool, bn=True):
        super().__init__()
        self.conv = TimeFolded(nn.Conv2d(2, 3, 3, padding=1, bias=not bn))
        self.bn = TimeFolded(nn.BatchNorm2d(3)) if bn else nn.Identity()
        self.sn = plif.PLIF(v_threshold=0.2)
        self.pool = TimeFolded(pool)

    def forward(self, x):
        return self.pool(self.sn(self.bn(self.conv(x))))


def step(net, x):
    out = net(x)
    out.mul(torch.linspace(0.5, 1.5, out.numel()).view(out.shape)).sum().backward()
    return out.detach(), {{n: p.grad.clone() for n, p in net.named_parameters()}}


def compare(written, fused, x):
    (o1, g1), (o0, g0) = step(fused, x), step(written, x)
    if o1.shape != o0.shape or not torch.equal(o1, o0):
        return f"differ: output {{list(o1.shape)}} fused, {{list(o0.shape)}} as written"
    bad = [n for n in g0 if (g1[n] - g0[n]).abs().max() > 1e-4 * g0[n].abs().max().clamp_min(1e-12)]
    return f"differ: gradients {{bad}}" if bad else "agree"


x = torch.rand(2, 2, 2, 7, 9, generator=torch.Generator().manual_seed(1))
try:
{call}
except (TypeError, ValueError) as e:
    print(f"python: error: {{type(e).__name__}}: {{e}}", file=sys.stderr)
    sys.exit(2)
"""

_POOLS = {"2x3": "(2, 3)", "2-s2x1": "2, (2, 1)", "3x2-s2x1": "(3, 2), (2, 1)",
          "3-s2-pad1": "3, 2, 1", "2-dil2": "2, dilation=2", "3-s2-ceil": "3, 2, ceil_mode=True"}

_POOL_CALL = ("    written = Net(nn.MaxPool2d({pool}), bn={bn})\n"
              "    print(compare(written, plif.fuse(copy.deepcopy(written), '{memory}'), x))")

_HOOK_CALL = """    written = Net(nn.MaxPool2d(2))
    fused = plif.fuse(copy.deepcopy(written))
    for net in (written, fused):
        net.{where}.register_full_backward_hook(lambda m, gi, go: tuple(None if g is None else 3 * g for g in gi))
    print(compare(written, fused, x))"""

_SLICE_CALL = """    written = nn.Sequential(TimeFolded(nn.Conv2d(2, 3, 3, padding=1, bias=False)), TimeFolded(nn.BatchNorm2d(3)),
                            plif.PLIF(v_threshold=0.2), TimeFolded(nn.MaxPool2d(2)))
    fused = plif.fuse(copy.deepcopy(written))
    print("agree" if torch.equal(fused[:3](x), written[:3](x)) else "differ")"""

_SJ_CALL = """    from spikingjelly.activation_based import functional, layer, neuron
    sn = neuron.IFNode(step_mode="m")
    model = nn.Sequential(layer.Conv2d(2, 3, 3, bias=False), sn, layer.Conv2d(3, 3, 3, bias=False), sn)
    functional.set_step_mode(model, "m")
    plif.from_spikingjelly(model)"""

# name -> (the call, indented; what the refusal or the output says; expect)
CALLS = {
    **{f"pool-{name}-{memory}": (_POOL_CALL.format(pool=pool, bn=True, memory=memory), "agree", "ok")
       for name, pool in _POOLS.items() for memory in ("fused", "exact", "low", "spikes")},
    **{f"pool-{name}-after-a-neuron": (_POOL_CALL.format(pool=_POOLS[name], bn=False, memory="fused"), "agree",
                                       "ok") for name in ("2x3", "3x2-s2x1")},
    **{f"backward-hook-on-{where}": (_HOOK_CALL.format(where=where), "agree", "ok") for where in ("bn", "sn")},
    "slice-of-a-fused-sequential": (_SLICE_CALL, "agree", "ok"),
    **{f"fused-blocks-of-{name}": (f"    plif.fused_blocks({value})",
                                   "plif.fused_blocks(model): model takes a torch.nn.Module", "refuse")
       for name, value in (("none", "None"), ("int", "3"), ("str", "'x'"), ("tensor", "torch.zeros(2)"),
                           ("list", "[nn.Linear(2, 2)]"))},
    "fuse-of-a-list": ("    plif.fuse([nn.Linear(2, 2)])", "plif.fuse(model): model takes a torch.nn.Module", "refuse"),
    "spikingjelly-neuron-called-twice": (_SJ_CALL, "1: is called 2 times in one forward", "refuse"),
}


def _case(name: str, call: str, says: str, expect: str) -> Case:
    def run(env):
        if "spikingjelly" in call and importlib.util.find_spec("spikingjelly") is None:
            raise SkipCase("spikingjelly is not installed")
        return env.python(PRELUDE.format(call=call))

    def check(tmp, r):
        return None if says in r.stderr + r.stdout else f"the output does not say {says!r}: {r.stdout.strip()[:200]}"

    return Case(f"fuse-{name}", AREA, run=run, check=check, expect=expect)


CASES = [_case(name, *c) for name, c in CALLS.items()]
