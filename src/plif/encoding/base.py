"""What every encoder shares: ``T`` and its keyword-only options, the check of its input (a real
floating-point tensor, its values in range) and the refusal of an output too large to hold."""
from __future__ import annotations

import numbers

import torch
from torch import nn

# an output (with its temporaries) up to this many bytes is made without asking how much memory is free
_CHEAP_BYTES = 1 << 30


def check_T(T, who: str = "T") -> int:
    """``T`` as an ``int``: a positive integer (not a bool), else a one-line ``ValueError``."""
    if isinstance(T, bool) or not isinstance(T, numbers.Integral) or T < 1:
        raise ValueError(f"{who} must be a positive integer, got {T!r}")
    return int(T)


def refuse_positional(who: str, args: tuple, names: tuple[str, ...]) -> None:
    """Options after ``T`` are keyword-only: a positional one is refused in one line that shows
    the call with the keyword it was most likely meant for (``names``, in the order a SpikingJelly
    or snnTorch user types them)."""
    if args and not names:
        raise TypeError(f"{who} takes only T, got {len(args)} more argument{'s' * (len(args) > 1)}: {args!r}")
    if args:
        given = ", ".join(f"{n}={a!r}" for n, a in zip(names, args))
        raise TypeError(f"{who}: the arguments after T are keyword-only ({', '.join(n + '=' for n in names)}); "
                        f"write {who}(T, {given})")


def refuse_unknown(who: str, unknown: dict, names: tuple[str, ...], theirs: dict[str, str] | None = None) -> None:
    """A keyword this encoder does not take, refused in one line naming plif's spelling where it is
    another library's (``theirs``: their name -> plif's)."""
    for key in unknown:
        if theirs and key in theirs:
            raise TypeError(f"{who}: {key}= is another library's name; plif's is {theirs[key]}=")
        raise TypeError(f"{who}: unknown argument {key}=; it takes T and {', '.join(n + '=' for n in names)}")


def check_input(x, who: str, *, scaled: bool = True) -> torch.Tensor:
    """``x`` is a real floating-point ``torch.Tensor``, else a one-line ``TypeError`` naming what to
    do; ``scaled``: the encoder reads intensities in [0, 1] (integer images need scaling too)."""
    if not isinstance(x, torch.Tensor):
        kind = f"{type(x).__module__}.{type(x).__name__}" if type(x).__module__ != "builtins" else type(x).__name__
        if kind == "numpy.ndarray":
            raise TypeError(f"{who}: x must be a torch.Tensor, got numpy.ndarray; convert it with torch.from_numpy(x)")
        raise TypeError(f"{who}: x must be a torch.Tensor, got {kind}; "
                        "make one with torch.tensor(x, dtype=torch.float32)")
    if x.dtype.is_complex:
        raise TypeError(f"{who}: x must be a real floating-point tensor, got {x.dtype}")
    if not x.dtype.is_floating_point:
        scale = " and scale it to [0, 1]" if scaled else ""
        raise TypeError(f"{who}: x must be a floating-point tensor, got {x.dtype}; convert it to float{scale} "
                        "(x.float() / 255 for 8-bit pixels)")
    return x


def _bytes(n: float) -> str:
    for unit, size in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:,.0f} bytes"


def check_size(who: str, T: int, x: torch.Tensor, per_element: float, what: str = "output") -> None:
    """Refuse, in one line with the numbers, an encoding whose ``[T, *x.shape]`` output and its
    temporaries (``per_element`` bytes per output element in all) need more memory than ``x``'s
    device has free.  Free memory is asked only beyond 1 GB, and never while compiling or capturing
    a CUDA graph (no host call there)."""
    need = T * x.numel() * per_element
    if need <= _CHEAP_BYTES or torch.compiler.is_compiling():
        return
    if x.device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        return
    from ..device import free_memory

    free = free_memory(x.device)
    if need > free:
        shape = ", ".join(map(str, x.shape))
        raise ValueError(f"{who}: T = {T} steps of a [{shape}] input need about {_bytes(need)} for the {what} "
                         f"[T, {shape}], more than the {_bytes(free)} free on {x.device}; lower T or the batch size")


def check_unit_range(x: torch.Tensor, who: str) -> None:
    """Refuse ``x`` outside ``[0, 1]`` (NaN too) without a host sync where it would cost one (the
    package docstring)."""
    if torch.compiler.is_compiling():
        return
    bad = ~((x >= 0) & (x <= 1))
    if x.device.type != "cpu":
        torch._assert_async(~bad.any(), f"{who}: input must lie in [0, 1] (an intensity)")
        return
    n = int(bad.sum())
    if n:
        vals = x[bad]
        raise ValueError(f"{who}: input must lie in [0, 1] (an intensity), got {n} of {x.numel()} values outside "
                         f"(min {float(vals.min()):g}, max {float(vals.max()):g}); scale images to [0, 1] first "
                         "(x / 255 for 8-bit pixels), or use DirectEncoder for any real input")


class Encoder(nn.Module):
    """An encoder of static input over ``T`` steps: ``[B, ...] -> [T, B, ...]`` (time first).

    ``name`` is what ``plif train --encoder`` and a run's ``config.json`` call it."""

    name = ""
    spikes = True  # its output is 0/1 spikes (a network after it has nothing to hoist)

    def __init__(self, T: int):
        super().__init__()
        self.T = check_T(T)

    def extra_repr(self) -> str:
        return f"T={self.T}"
