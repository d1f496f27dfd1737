"""Surrogate gradients for the Heaviside spike function, in one registry.

Forward is always the exact step ``Θ(x) = 1 if x >= 0 else 0``; backward replaces ``Θ'(x)``
with the derivative of a smooth (or piecewise) primitive ``σ(x)``.  Each entry is a pure
function of ``(x, alpha)`` and carries a small integer ``code`` that fused kernels use as a
compile-time flag, so adding a surrogate here is the only change a new one needs on the
PyTorch paths.

| name      | σ(x)                                        | σ'(x)                                   |
|-----------|---------------------------------------------|-----------------------------------------|
| atan      | arctan(π/2·α·x)/π + 1/2  (paper, α = 2)      | (α/2) / (1 + (π/2·α·x)²)                |
| sigmoid   | sigmoid(α·x)                (α = 4)          | α·sigmoid(αx)·(1 - sigmoid(αx))         |
| rect      | clamp(α·x/2 + 1/2, 0, 1)  piecewise linear  (α = 1) | α/2 where abs(x) < 1/α, else 0     |
| triangle  | piecewise quadratic         (α = 1)          | max(0, α - α²·abs(x))                   |

Custom surrogates: :func:`register_surrogate` adds a name with its derivative (or only its
primitive, differentiated by autograd).  The fused kernels only know the four built-ins, so a layer
using a custom one runs on the ``bptt`` path (``backend='auto'`` says so once).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

__all__ = ["Surrogate", "SURROGATES", "CUSTOM_SURROGATES", "register_surrogate", "unregister_surrogate",
           "get_surrogate", "heaviside", "spike_fn"]


@dataclass(frozen=True)
class Surrogate:
    """A named surrogate: ``primitive(x, alpha)``, its derivative ``grad(x, alpha)``, and the two
    constants ``(a, b)`` the fused kernels fold ``alpha`` into (``code`` selects the formula there).
    A custom surrogate has ``code=None`` and no kernel constants: only the PyTorch paths run it."""

    name: str
    code: int | None
    default_alpha: float
    primitive: Callable[[torch.Tensor, float], torch.Tensor] | None
    grad: Callable[[torch.Tensor, float], torch.Tensor]
    kernel_constants: Callable[[float], tuple[float, float]] | None

    @property
    def builtin(self) -> bool:
        """True for the four surrogates the fused kernels implement."""
        return self.code is not None


def _atan(x, alpha):
    return torch.atan(math.pi / 2 * alpha * x) / math.pi + 0.5


def _atan_grad(x, alpha):
    return (alpha / 2) / (1 + (math.pi / 2 * alpha * x) ** 2)


def _sigmoid(x, alpha):
    return torch.sigmoid(alpha * x)


def _sigmoid_grad(x, alpha):
    s = torch.sigmoid(alpha * x)
    return alpha * s * (1 - s)


def _rect(x, alpha):
    return torch.clamp(alpha * x / 2 + 0.5, 0.0, 1.0)


def _rect_grad(x, alpha):
    return (x.abs() < 1 / alpha).to(x.dtype) * (alpha / 2)


def _triangle(x, alpha):
    y = alpha * x
    inner = torch.where(y < 0, 0.5 * (y + 1) ** 2, 1 - 0.5 * (1 - y) ** 2)
    return torch.where(y <= -1, torch.zeros_like(y), torch.where(y >= 1, torch.ones_like(y), inner))


def _triangle_grad(x, alpha):
    return torch.clamp(alpha - alpha * alpha * x.abs(), min=0.0)


SURROGATES: dict[str, Surrogate] = {
    s.name: s
    for s in (
        # kernels: atan (α/2) / (1 + (b u)²) with b = π/2·α; sigmoid a = α; rect a = α/2 where
        # |u| < b = 1/α; triangle max(0, a - b|u|) with a = α, b = α²
        Surrogate("atan", 0, 2.0, _atan, _atan_grad, lambda a: (a / 2, math.pi / 2 * a)),
        Surrogate("sigmoid", 1, 4.0, _sigmoid, _sigmoid_grad, lambda a: (a, 0.0)),
        Surrogate("rect", 2, 1.0, _rect, _rect_grad, lambda a: (a / 2, 1 / a)),
        Surrogate("triangle", 3, 1.0, _triangle, _triangle_grad, lambda a: (a, a * a)),
    )
}
"""The four built-in surrogates by name (the table above), each with its kernel ``code``."""


CUSTOM_SURROGATES: dict[str, Surrogate] = {}
"""Surrogates added by :func:`register_surrogate`, by name (``code=None``: PyTorch paths only)."""


def _grad_of(primitive: Callable) -> Callable:
    """``σ'`` from ``σ`` by autograd (elementwise: ``σ`` must not mix elements)."""
    def grad(x, alpha):
        with torch.enable_grad():
            xg = x.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(primitive(xg, alpha).sum(), xg)
        return g
    return grad


def register_surrogate(name: str, grad: Callable | None = None, primitive: Callable | None = None,
                       default_alpha: float = 1.0) -> Surrogate:
    """Add a surrogate under ``name``: ``grad(x, alpha)`` is ``σ'(x)`` (what the backward uses), or give
    ``primitive(x, alpha) = σ(x)`` alone and autograd derives ``σ'``.  Both are elementwise torch
    functions of a tensor and a float.  Layers take it as ``surrogate=name``; it runs on the ``bptt``
    and ``reference`` paths (the fused kernels keep their four built-ins).  Registering an existing
    custom name replaces it; a built-in name is refused.  Returns the entry."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a surrogate name must be a non-empty string, got {name!r}")
    if name in SURROGATES:
        raise ValueError(f"{name!r} is a built-in surrogate; register a custom one under another name")
    if grad is None and primitive is None:
        raise ValueError(f"surrogate {name!r}: give its derivative grad(x, alpha) or its primitive(x, alpha)")
    for what, fn in (("grad", grad), ("primitive", primitive)):
        if fn is not None and not callable(fn):
            raise TypeError(f"surrogate {name!r}: {what} must be a function (x, alpha) -> tensor, got {fn!r}")
    entry = Surrogate(name, None, float(default_alpha), primitive, grad if grad is not None else _grad_of(primitive), None)
    CUSTOM_SURROGATES[name] = entry
    return entry


def unregister_surrogate(name: str) -> None:
    """Remove a custom surrogate (built-ins stay)."""
    if name not in CUSTOM_SURROGATES:
        raise ValueError(f"no custom surrogate {name!r}; registered: {', '.join(CUSTOM_SURROGATES) or 'none'}")
    del CUSTOM_SURROGATES[name]


def get_surrogate(name: str) -> Surrogate:
    """Look a surrogate up by name (built-in first, then custom); the error lists the valid names."""
    entry = SURROGATES.get(name) or CUSTOM_SURROGATES.get(name)
    if entry is None:
        valid = ", ".join([*SURROGATES, *CUSTOM_SURROGATES])
        raise ValueError(f"unknown surrogate {name!r}; valid: {valid} (plif.surrogate.register_surrogate adds one)")
    return entry


def heaviside(x: torch.Tensor) -> torch.Tensor:
    """``Θ(x)``: 1 where ``x >= 0`` else 0, in ``x``'s dtype."""
    return (x >= 0).to(x.dtype)


class _SpikeFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, surrogate_name: str, alpha: float):
        ctx.save_for_backward(x)
        ctx.surrogate = get_surrogate(surrogate_name)
        ctx.alpha = alpha
        return heaviside(x)

    @staticmethod
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        return grad_out * ctx.surrogate.grad(x, ctx.alpha), None, None


def spike_fn(x: torch.Tensor, surrogate: str = "atan", alpha: float | None = None) -> torch.Tensor:
    """Heaviside forward, surrogate derivative backward (differentiable through autograd)."""
    sg = get_surrogate(surrogate)
    return _SpikeFn.apply(x, sg.name, sg.default_alpha if alpha is None else float(alpha))
