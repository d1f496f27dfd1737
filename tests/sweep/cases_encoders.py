"""The encoders (``plif.encoding``) as a user of the library calls them (issue 53: int64, bool,
complex, numpy or list input, T = 10**6 or 2**40, a NaN mean or std, an option given positionally;
issue 56.3: the new encoders' options), and ``NetworkState.to`` with a bad device.

Each case is ``python -c`` in a fresh process; a ``TypeError`` / ``ValueError`` is printed as one
``python: error:`` line (exit 2), anything else reaches the user as a traceback.  ``check`` finds the
words the refusal (or the result) must hold.
"""
from __future__ import annotations

from .case import Case

AREA = "encoders"

PRELUDE = """
import sys
import numpy as np
import torch
from plif.encoding import *
try:
{call}
except (TypeError, ValueError) as e:
    print(f"python: error: {{type(e).__name__}}: {{e}}", file=sys.stderr)
    sys.exit(2)
"""

INPUTS = {  # name -> (the input, what the refusal says)
    "int64": ("torch.randint(0, 256, (2, 1, 4, 4))", "x must be a floating-point tensor, got torch.int64; convert it to float"),
    "bool": ("torch.rand(2, 1, 4, 4) > 0.5", "x must be a floating-point tensor, got torch.bool"),
    "complex": ("torch.rand(2, 1, 4, 4, dtype=torch.complex64)", "x must be a real floating-point tensor, got torch.complex64"),
    "numpy": ("np.random.rand(2, 1, 4, 4).astype(np.float32)",
              "x must be a torch.Tensor, got numpy.ndarray; convert it with torch.from_numpy(x)"),
    "list": ("[[0.1, 0.2], [0.3, 0.4]]", "x must be a torch.Tensor, got list"),
}
BIG = "torch.rand(64, 1, 28, 28)"

# name -> (the call, indented; what the refusal or the output says; expect)
CALLS = {}
for enc in ("Poisson", "Latency", "Direct", "WeightedPhase"):
    for name, (x, says) in INPUTS.items():
        CALLS[f"{enc.lower()}-{name}-input"] = (f"    {enc}Encoder(4)({x})", f"{enc}Encoder: {says}", "refuse")
    for T in ("10**6", "2**40"):
        CALLS[f"{enc.lower()}-T-{T.replace('**', '^')}"] = (
            f"    {enc}Encoder({T})({BIG})", "more than the", "refuse")
CALLS.update({
    "latency-log-positional": ("    LatencyEncoder(8, 'log')", "write LatencyEncoder(T, function='log')", "refuse"),
    "latency-enc-function": ("    LatencyEncoder(8, enc_function='log')", "plif's is function=", "refuse"),
    "latency-log-keyword": ("    print(LatencyEncoder(8, function='log')(torch.tensor([1.0, 0.5, 0.0])).argmax(0).tolist())",
                            "[0, 1, 7]", "ok"),
    "poisson-positional-generator": ("    PoissonEncoder(8, torch.Generator())", "write PoissonEncoder(T, generator=", "refuse"),
    "make-encoder-nan-mean": ("    make_encoder({'name': 'poisson', 'mean': [float('nan')], 'std': [1]}, 8)",
                              "Intensity: mean must be finite", "refuse"),
    "make-encoder-nan-std": ("    make_encoder({'name': 'poisson', 'mean': [0.5], 'std': [float('nan')]}, 8)",
                             "Intensity: std must be finite", "refuse"),
    "make-encoder-zero-std": ("    make_encoder({'name': 'latency', 'mean': [0.5], 'std': [0]}, 8)",
                              "Intensity: std must be > 0", "refuse"),
    "make-encoder-std-per-channel": (
        "    from plif.models import build_network\n"
        "    build_network('FC10-PLIF', (3, 4, 4), 4, encoder={'name': 'poisson', 'mean': [0.5, 0.5], 'std': [1, 1]})",
        "mean and std have 2 values, the input has 3 channels", "refuse"),
    "make-encoder-delta": ("    make_encoder('delta', 8)", "encoder 'delta' is not a network's feed", "refuse"),
    "delta-threshold-nan": ("    DeltaEncoder(4, threshold=float('nan'))", "threshold must be a finite number > 0", "refuse"),
    "delta-wrong-T": ("    DeltaEncoder(4)(torch.rand(3, 2))", "x must be a sequence [T, ...] of T = 4 steps", "refuse"),
    "periodic-empty-pattern": ("    PeriodicEncoder(4)(torch.zeros(0, 2))", "pattern must be [P, ...] with P >= 1", "refuse"),
    "population-sj-names": ("    PopulationEncoder(4, obs_dim=3, pop_dim=5)", "plif's is features=", "refuse"),
    "population-wrong-features": ("    PopulationEncoder(4, features=3, neurons=2)(torch.rand(2, 5))",
                                  "x must be [B, ..., 3] (features last)", "refuse"),
    "population-std-zero": ("    PopulationEncoder(4, features=3, neurons=2, std=0)", "std must be a finite number > 0",
                            "refuse"),
    "network-state-to-bogus": (
        "    from plif.models import NetworkState\n    NetworkState(1, (torch.zeros(2),), ()).to('bogus')",
        "NetworkState.to('bogus'): takes what Tensor.to takes", "refuse"),
})


def _case(name: str, call: str, says: str, expect: str) -> Case:
    def run(env):
        return env.python(PRELUDE.format(call=call))

    def check(tmp, r):
        return None if says in r.stderr + r.stdout else f"the output does not say {says!r}"

    return Case(f"encoders-{name}", AREA, run=run, check=check, expect=expect)


CASES = [_case(name, *c) for name, c in CALLS.items()]
