"""One small builder per notation token kind: ``(token, input shape, options) -> (module, output shape)``.

:data:`BUILDERS` is the registry :func:`plif.models.build_network` walks; a token kind added to
:data:`plif.models.notation.TOKENS` needs one function here.  A builder raises
:class:`BuildError` with a message about the token; the caller adds the position in the string.
Shapes are per sample and per time-step: ``(C, H, W)`` or ``(N,)``.  No layer may hold more than
:data:`MAX_SIZE` weights or values per sample (2^40, 4 TiB of float32): beyond that torch's sizes
overflow before any memory is asked for, and no machine could hold it anyway.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from torch import nn

from ..layers import MaxPool2d, PerStepBatchNorm, TimeFolded, TimeInvariantDropout, Voting
from ..neurons import make_neuron
from .notation import Token

__all__ = ["BuildOptions", "BuildError", "BUILDERS", "Built", "MAX_SIZE"]

MAX_SIZE = 2**40


class BuildError(ValueError):
    """A token that cannot be built on its input shape (the message says why)."""


@dataclass(frozen=True)
class BuildOptions:
    """The network-wide overrides of :func:`build_network` (see its docstring)."""

    neuron: str | None = None
    tau0: float = 2.0
    pool: str | None = None
    bn_per_step: bool = False
    per_channel_tau: bool = False
    dropout_p: float | None = None
    neuron_kwargs: tuple = ()


@dataclass(frozen=True)
class Built:
    """What a builder returns: the modules to append (in order) with their labels and output shapes."""

    modules: tuple  # ((label, kind, module, out_shape), ...)


def _check_size(what: str, n: int) -> None:
    if n > MAX_SIZE:
        raise BuildError(f"{what} would be {n:,}, more than {MAX_SIZE:,} (2^40)")


def _one(tok: Token, module: nn.Module, shape, label: str | None = None) -> Built:
    return Built(((label or tok.text, tok.kind, module, tuple(shape)),))


def _window(size: int, k: int, s: int, pad: int = 0) -> int:
    return (size + 2 * pad - k) // s + 1


def build_conv(tok: Token, shape: tuple, o: BuildOptions) -> Built:
    a = tok.args
    if len(shape) != 3:
        raise BuildError("a convolution needs a [C, H, W] input")
    pad = a.get("p", a["k"] // 2)
    h, w = _window(shape[1], a["k"], a["s"], pad), _window(shape[2], a["k"], a["s"], pad)
    if h <= 0 or w <= 0:
        raise BuildError("the kernel is larger than the padded input")
    _check_size("its weight count", a["out"] * shape[0] * a["k"] ** 2)
    _check_size("its output per sample", a["out"] * h * w)
    conv = nn.Conv2d(shape[0], a["out"], a["k"], a["s"], pad, bias=False)
    return _one(tok, TimeFolded(conv), (a["out"], h, w))


def build_bn(tok: Token, shape: tuple, o: BuildOptions) -> Built:
    bn = nn.BatchNorm2d(shape[0]) if len(shape) == 3 else nn.BatchNorm1d(shape[0])
    return _one(tok, PerStepBatchNorm(bn) if o.bn_per_step else TimeFolded(bn), shape)


def build_neuron(tok: Token, shape: tuple, o: BuildOptions) -> Built:
    name = o.neuron or tok.args["name"]
    extra = {"num_channels": shape[0]} if o.per_channel_tau and name.upper() == "PLIF" else {}
    module = make_neuron(name, tau=o.tau0, **extra, **dict(o.neuron_kwargs))
    return _one(tok, module, shape, label=name.upper())


def build_pool(tok: Token, shape: tuple, o: BuildOptions) -> Built:
    a = tok.args
    op = a["op"]
    if len(shape) == 1:
        if op != "AP" or a["k"] != a["s"]:
            raise BuildError("on features only the voting layer APk<n>s<n> is defined")
        if shape[0] % a["k"]:
            raise BuildError(f"voting needs a multiple of {a['k']} features")
        return _one(tok, Voting(a["k"]), (shape[0] // a["k"],))
    if o.pool is not None:
        op = "MP" if o.pool == "max" else "AP"
    h, w = _window(shape[1], a["k"], a["s"]), _window(shape[2], a["k"], a["s"])
    if h <= 0 or w <= 0:
        raise BuildError("the pooling window is larger than the input")
    cls = MaxPool2d if op == "MP" else nn.AvgPool2d  # plif's: the compiled CPU kernel
    return _one(tok, TimeFolded(cls(a["k"], a["s"])), (shape[0], h, w), label=f"{op}k{a['k']}s{a['s']}")


def build_dropout(tok: Token, shape: tuple, o: BuildOptions) -> Built:
    return _one(tok, TimeInvariantDropout(tok.args["p"] if o.dropout_p is None else o.dropout_p), shape)


def build_fc(tok: Token, shape: tuple, o: BuildOptions) -> Built:
    out = tok.args["out"]
    flat = (int(math.prod(shape)),)
    _check_size("its weight count", flat[0] * out)
    fc = (tok.text, tok.kind, TimeFolded(nn.Linear(flat[0], out, bias=False)), (out,))
    if len(shape) == 3:
        return Built((("flatten", "flatten", TimeFolded(nn.Flatten()), flat), fc))
    return Built((fc,))


BUILDERS: dict[str, Callable[[Token, tuple, BuildOptions], Built]] = {
    "conv": build_conv, "bn": build_bn, "neuron": build_neuron, "pool": build_pool,
    "dropout": build_dropout, "fc": build_fc,
}
