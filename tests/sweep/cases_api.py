"""The Python API as a user of the library calls it (issue 39.3): ``net(x)`` and ``net.step`` given a
numpy array, integer or float64 frames, a batch-first tensor, another network's state.

Each case is ``python -c`` in a fresh process: a network is built, then the one call is made; a
``TypeError`` / ``ValueError`` is printed as one ``python: error:`` line (exit 2), anything else
reaches the user as a traceback.  ``check`` finds the words the refusal (or the result) must hold.
"""
from __future__ import annotations

from .case import Case

AREA = "api"

PRELUDE = """
import sys
import numpy as np
import torch
from plif.models import build_network
torch.manual_seed(0)
net = build_network("c4k3s1-BN-PLIF-MPk2s2-DP-FC10-PLIF", (2, 8, 8), 4).eval()
x = torch.rand(4, 3, 2, 8, 8)
try:
{call}
except (TypeError, ValueError) as e:
    print(f"python: error: {{type(e).__name__}}: {{e}}", file=sys.stderr)
    sys.exit(2)
"""

# name -> (the call, indented; what the refusal or the output says; expect)
CALLS = {
    "numpy-input": ("    net(np.zeros((4, 3, 2, 8, 8), dtype=np.float32))",
                    "expected a torch.Tensor, got numpy.ndarray; convert it with torch.from_numpy(x)", "refuse"),
    "numpy-step": ("    net.step(np.zeros((3, 2, 8, 8), dtype=np.float32))", "expected a torch.Tensor, got numpy.ndarray",
                   "refuse"),
    "uint8-frames": ("    net((x * 255).to(torch.uint8))", "the network computes in torch.float32", "refuse"),
    "float64-frames": ("    net(x.double())", "convert one: x.to(torch.float32) or net.to(torch.float64)", "refuse"),
    "batch-first": ("    net(torch.rand(3, 4, 2, 8, 8))",
                    "looks batch-first", "refuse"),
    "batch-first-asked": ("    print(tuple(net(x.transpose(0, 1).contiguous(), time_first=False).shape))", "(4, 3, 10)",
                          "ok"),
    "wrong-channels": ("    net(torch.rand(4, 3, 3, 8, 8))", "expected frames [T, B, 2, 8, 8], got [4, 3, 3, 8, 8]",
                       "refuse"),
    "state-of-a-deeper-network": (
        "    other = build_network('c4k3s1-PLIF-c4k3s1-PLIF-MPk2s2-FC10-PLIF', (2, 8, 8), 4)\n"
        "    _, s = other.step(x[0])\n    net.step(x[0], s)", "holds 3 potentials, this network has 2", "refuse"),
    "state-of-a-wider-network": (
        "    other = build_network('c6k3s1-BN-PLIF-MPk2s2-DP-FC10-PLIF', (2, 8, 8), 4).eval()\n"
        "    _, s = other.step(x[0])\n    net.step(x[0], s)", "potential 0 is [3, 6, 8, 8], this network's is [B, 4, 8, 8]",
        "refuse"),
    "state-a-dict": ("    net.step(x[0], {})", "state must be the NetworkState", "refuse"),
    "state-a-tensor": ("    net.step(x[0], torch.zeros(3))", "state must be the NetworkState", "refuse"),
    "state-float64": ("    _, s = net.step(x[0])\n    net.step(x[1], s.to(torch.float64))",
                      "convert it with state.to(torch.float32)", "refuse"),
    "state-moved-back": ("    _, s = net.step(x[0])\n    y, s = net.step(x[1], s.to(torch.float64).to(torch.float32))\n"
                         "    print(tuple(y.shape), len(s.detach().potentials))", "(3, 10) 2", "ok"),
    # issue 53: each of these was taken in silence
    "time-first-zero": ("    net(x, time_first=0)", "True ([T, B, ...]), False ([B, T, ...]) or None, got 0", "refuse"),
    "state-t-negative": ("    from plif.models import NetworkState\n    _, s = net.step(x[0])\n"
                         "    net.step(x[1], NetworkState(-1, s.potentials, s.masks))",
                         "the state's t (steps taken, 0 or more) is -1", "refuse"),
    "training-step-past-T-per-step-bn": (
        "    net = build_network('c4k3s1-BN-PLIF-MPk2s2-DP-FC10-PLIF', (2, 8, 8), 4, bn_per_step=True).train()\n"
        "    s = None\n    for t in range(5):\n        _, s = net.step(x[0], s)",
        "step 5 is past T = 4 in training, through a per-step BatchNorm (layer 1)", "refuse"),
}


def _case(name: str, call: str, says: str, expect: str) -> Case:
    def run(env):
        return env.python(PRELUDE.format(call=call))

    def check(tmp, r):
        return None if says in r.stderr + r.stdout else f"the output does not say {says!r}"

    return Case(f"api-{name}", AREA, run=run, check=check, expect=expect)


CASES = [_case(name, *c) for name, c in CALLS.items()]
