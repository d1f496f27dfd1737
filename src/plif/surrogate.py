"""Surrogate gradients for the Heaviside spike function, in one registry.

Forward is always the exact step ``Θ(x) = 1 if x >= 0 else 0``; backward replaces ``Θ'(x)``
with the derivative of a smooth (or piecewise) primitive ``σ(x)``.  Each entry is a pure
function of ``(x, alpha)``.  The fused kernels implement four derivative formulas, the closed
forms of :data:`CLOSED_FORMS`, each selected by a small integer ``code`` (a compile-time flag
there) and fed two constants ``(a, b)`` folded from ``alpha`` on the host; the built-ins are those
four with their constants:

| name      | σ(x)                                        | σ'(x)                                   |
|-----------|---------------------------------------------|-----------------------------------------|
| atan      | arctan(π/2·α·x)/π + 1/2  (paper, α = 2)      | (α/2) / (1 + (π/2·α·x)²)                |
| sigmoid   | sigmoid(α·x)                (α = 4)          | α·sigmoid(αx)·(1 - sigmoid(αx))         |
| rect      | clamp(α·x/2 + 1/2, 0, 1)  piecewise linear  (α = 1) | α/2 where abs(x) < 1/α, else 0     |
| triangle  | piecewise quadratic         (α = 1)          | max(0, α - α²·abs(x))                   |

Custom surrogates: :func:`register_surrogate` adds a name with its derivative (or only its
primitive, differentiated by autograd).  One that is a closed form of the kernels with other
constants says so (``closed_form=("atan", constants)``, checked against its derivative) and runs in
the fused kernels; any other runs on the ``bptt`` path, and ``backend='auto'`` says so once.

Outside the process that registered it (``plif train``, a resumed run, ``plif eval``) a custom
surrogate is named ``MODULE:NAME``: :func:`get_surrogate` imports ``MODULE`` (which registers
``NAME`` when imported) the first time the name is asked for, so a run folder's config names a
surrogate that every later command can find again (:attr:`Surrogate.spec`).  ``MODULE`` is looked
for where installed modules are and on ``PYTHONPATH``, never in the working directory that
``python -m`` and ``python -c`` put first on ``sys.path`` (a ``MODULE.py`` lying there would
otherwise run), unless ``PYTHONPATH`` names that folder.  A module named by a run folder is imported
only when the user trusts it (:func:`plif.runs.stored_surrogate`).
"""
from __future__ import annotations

import importlib
import math
import os
import sys
from dataclasses import dataclass
from typing import Callable

import torch

__all__ = ["Surrogate", "ClosedForm", "CLOSED_FORMS", "SURROGATES", "PAPER_SURROGATE", "CUSTOM_SURROGATES",
           "register_surrogate", "unregister_surrogate", "get_surrogate", "surrogate_spec", "unless_paper", "heaviside",
           "spike_fn"]


@dataclass(frozen=True)
class ClosedForm:
    """A derivative formula ``σ'(u) = grad(u, a, b)`` the fused kernels implement as flag ``code``."""

    code: int
    grad: Callable[[torch.Tensor, float, float], torch.Tensor]


def _atan_form(u, a, b):
    return a / (1 + (b * u) ** 2)


def _sigmoid_form(u, a, b):
    s = torch.sigmoid(a * u)
    return a * s * (1 - s)


def _rect_form(u, a, b):
    return (u.abs() < b).to(u.dtype) * a


def _triangle_form(u, a, b):
    return torch.clamp(a - b * u.abs(), min=0.0)


# The kernels' formulas (kernels/triton_neuron.py ``surrogate_grad``, kernels/cpu_neuron.h
# ``surrogate_grad``), written once in PyTorch: the built-ins' derivatives are these.
CLOSED_FORMS: dict[str, ClosedForm] = {
    "atan": ClosedForm(0, _atan_form),  # a / (1 + (b u)²)
    "sigmoid": ClosedForm(1, _sigmoid_form),  # a s (1 - s), s = sigmoid(a u); b unused
    "rect": ClosedForm(2, _rect_form),  # a where |u| < b, else 0
    "triangle": ClosedForm(3, _triangle_form),  # max(0, a - b |u|)
}
"""The four derivative formulas the fused kernels implement, by name: ``(code, constants)`` each;
a surrogate declares one of them (with its own constants) to run in the kernels."""


@dataclass(frozen=True)
class Surrogate:
    """A named surrogate: ``primitive(x, alpha)``, its derivative ``grad(x, alpha)``, and, when the
    fused kernels run it, the ``code`` of its closed form and ``kernel_constants(alpha) -> (a, b)``.
    ``module`` is the module that registered a custom surrogate (``None`` for the built-ins)."""

    name: str
    code: int | None
    default_alpha: float
    primitive: Callable[[torch.Tensor, float], torch.Tensor] | None
    grad: Callable[[torch.Tensor, float], torch.Tensor]
    kernel_constants: Callable[[float], tuple[float, float]] | None
    module: str | None = None

    @property
    def builtin(self) -> bool:
        """True for the four surrogates plif defines (:data:`SURROGATES`)."""
        return SURROGATES.get(self.name) is self

    @property
    def fused(self) -> bool:
        """True when the fused kernels run it (a closed form's ``code`` and its constants)."""
        return self.code is not None

    @property
    def spec(self) -> str:
        """How a run folder names it: a built-in's name; ``MODULE:NAME`` for a custom surrogate
        registered by an importable module; the bare name when a script (``__main__``) registered it,
        which only that process knows."""
        if self.module is None or self.module == "__main__":
            return self.name
        return f"{self.module}:{self.name}"


def _with_constants(form: str, constants: Callable[[float], tuple[float, float]]) -> Callable:
    grad = CLOSED_FORMS[form].grad
    return lambda x, alpha: grad(x, *constants(alpha))


def _builtin(name: str, default_alpha: float, primitive: Callable, constants: Callable) -> Surrogate:
    return Surrogate(name, CLOSED_FORMS[name].code, default_alpha, primitive, _with_constants(name, constants),
                     constants)


def _atan(x, alpha):
    return torch.atan(math.pi / 2 * alpha * x) / math.pi + 0.5


def _sigmoid(x, alpha):
    return torch.sigmoid(alpha * x)


def _rect(x, alpha):
    return torch.clamp(alpha * x / 2 + 0.5, 0.0, 1.0)


def _triangle(x, alpha):
    y = alpha * x
    inner = torch.where(y < 0, 0.5 * (y + 1) ** 2, 1 - 0.5 * (1 - y) ** 2)
    return torch.where(y <= -1, torch.zeros_like(y), torch.where(y >= 1, torch.ones_like(y), inner))


SURROGATES: dict[str, Surrogate] = {
    s.name: s
    for s in (
        _builtin("atan", 2.0, _atan, lambda a: (a / 2, math.pi / 2 * a)),
        _builtin("sigmoid", 4.0, _sigmoid, lambda a: (a, 0.0)),
        _builtin("rect", 1.0, _rect, lambda a: (a / 2, 1 / a)),
        _builtin("triangle", 1.0, _triangle, lambda a: (a, a * a)),
    )
}
"""The four built-in surrogates by name (the table above), each with its kernel ``code``."""

PAPER_SURROGATE = "atan"
"""The surrogate of the paper (and the default everywhere): arctan with α = 2."""


def unless_paper(spec: str, text: str = ", {} surrogate") -> str:
    """``text`` naming surrogate ``spec`` (at ``{}``) where it is not the paper's, else ``""``: what
    describes a run (its log, a sweep's lines, a setting's label, the report's notes) names its
    surrogate only where it differs.

    >>> unless_paper("sigmoid"), unless_paper("atan")
    (', sigmoid surrogate', '')
    """
    return "" if spec == PAPER_SURROGATE else text.format(spec)


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


def _check_closed_form(name: str, closed_form, grad: Callable | None, default_alpha: float) -> tuple:
    """``(form name, constants)`` after checking the declaration, and that ``grad`` (when given) is
    that formula with those constants, at two values of alpha on a grid of inputs."""
    if (not isinstance(closed_form, tuple) or len(closed_form) != 2 or closed_form[0] not in CLOSED_FORMS
            or not callable(closed_form[1])):
        raise ValueError(f"surrogate {name!r}: closed_form must be (form, constants) with form one of "
                         f"{', '.join(CLOSED_FORMS)} and constants(alpha) -> (a, b), got {closed_form!r}")
    form, constants = closed_form
    u = torch.linspace(-4.0, 4.0, 2001, dtype=torch.float64) + math.sqrt(2) * 1e-4  # no point on a kink
    for alpha in (default_alpha, 1.7 * default_alpha):
        values = constants(alpha)
        try:
            a, b = (float(c) for c in values)
        except (TypeError, ValueError):
            a = b = math.nan
        if not (math.isfinite(a) and math.isfinite(b)):
            raise ValueError(f"surrogate {name!r}: constants({alpha:g}) = {values!r} must be two finite numbers (a, b)")
        if grad is None:
            continue
        want, got = CLOSED_FORMS[form].grad(u, a, b), grad(u, alpha)
        if not torch.allclose(got, want, rtol=1e-5, atol=1e-7 * float(want.abs().max())):
            i = int((got - want).abs().argmax())
            raise ValueError(f"surrogate {name!r}: its grad is not the kernels' {form!r} form with constants "
                             f"(a, b) = ({a:g}, {b:g}) at alpha={alpha:g}: at x={float(u[i]):.4g} it gives "
                             f"{float(got[i]):.6g}, the form {float(want[i]):.6g}")
    return form, constants


def register_surrogate(name: str, grad: Callable | None = None, primitive: Callable | None = None,
                       default_alpha: float = 1.0, closed_form: tuple | None = None) -> Surrogate:
    """Add a surrogate under ``name``: ``grad(x, alpha)`` is ``σ'(x)`` (what the backward uses), or give
    ``primitive(x, alpha) = σ(x)`` alone and autograd derives ``σ'``.  Both are elementwise torch
    functions of a tensor and a float.  Layers take it as ``surrogate=name``.

    closed_form: ``(form, constants)`` when ``σ'`` is one of the fused kernels' formulas
    (:data:`CLOSED_FORMS`: ``atan``, ``sigmoid``, ``rect``, ``triangle``) with other constants:
    ``constants(alpha) -> (a, b)``.  The kernels then run it; ``grad`` may be left out (it is the
    form), and when given it is checked against the form.  Without it the surrogate runs on the
    ``bptt`` and ``reference`` paths.

    Register it in a module: training and every later command (``--resume``, ``plif eval``,
    ``stats``, ``export``) name it ``MODULE:NAME`` and import ``MODULE`` to find it again.
    Registering an existing custom name replaces it; a built-in name is refused.  Returns the entry."""
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"a surrogate name must be a non-empty string without ':', got {name!r}")
    if name in SURROGATES:
        raise ValueError(f"{name!r} is a built-in surrogate; register a custom one under another name")
    if grad is None and primitive is None and closed_form is None:
        raise ValueError(f"surrogate {name!r}: give its derivative grad(x, alpha), its primitive(x, alpha) "
                         "or its closed_form")
    for what, fn in (("grad", grad), ("primitive", primitive)):
        if fn is not None and not callable(fn):
            raise TypeError(f"surrogate {name!r}: {what} must be a function (x, alpha) -> tensor, got {fn!r}")
    if grad is None and primitive is not None:
        grad = _grad_of(primitive)
    code = constants = None
    if closed_form is not None:
        form, constants = _check_closed_form(name, closed_form, grad, float(default_alpha))
        code, grad = CLOSED_FORMS[form].code, grad or _with_constants(form, constants)
    module = sys._getframe(1).f_globals.get("__name__")  # the registering module: how MODULE:NAME finds it
    entry = Surrogate(name, code, float(default_alpha), primitive, grad, constants, module)
    CUSTOM_SURROGATES[name] = entry
    return entry


def unregister_surrogate(name: str) -> None:
    """Remove a custom surrogate (built-ins stay)."""
    if name not in CUSTOM_SURROGATES:
        raise ValueError(f"no custom surrogate {name!r}; registered: {', '.join(CUSTOM_SURROGATES) or 'none'}")
    del CUSTOM_SURROGATES[name]


def _unknown(name, option: str) -> ValueError:
    valid = ", ".join([*SURROGATES, *CUSTOM_SURROGATES])
    return ValueError(f"{option} {name!r}: unknown; valid: {valid}, or MODULE:NAME for a surrogate that importing "
                      "MODULE registers (plif.surrogate.register_surrogate)")


def get_surrogate(name: str, option: str = "surrogate") -> Surrogate:
    """Look a surrogate up by name (built-in first, then custom), or by ``MODULE:NAME``, importing
    ``MODULE`` if it is not imported yet.  Errors are one line naming ``option``: the valid names, or
    the module that cannot be imported and why."""
    entry = (SURROGATES.get(name) or CUSTOM_SURROGATES.get(name)) if isinstance(name, str) else None
    if entry is not None:
        return entry
    if not isinstance(name, str) or ":" not in name:
        raise _unknown(name, option)
    module, _, short = name.partition(":")
    if not module or not short:
        raise ValueError(f"{option} {name!r}: write MODULE:NAME, e.g. mypackage.surrogates:superspike")
    if not is_module_name(module):
        raise ValueError(f"{option} {name!r}: {module!r} is not a module name (dotted Python identifiers)")
    if module not in sys.modules:
        try:
            import_outside_cwd(module)
        except Exception as e:  # noqa: BLE001  (user code: any error it raises while importing is the reason)
            raise ValueError(f"{option} {name!r}: cannot import module {module!r} ({type(e).__name__}: {e}); "
                             "it must be installed or on PYTHONPATH (the working directory is not searched: "
                             "import it first, or name its folder in PYTHONPATH)") from None
    entry = SURROGATES.get(short) or CUSTOM_SURROGATES.get(short)
    if entry is None:
        raise ValueError(f"{option} {name!r}: module {module!r} registers no surrogate {short!r}; registered: "
                         f"{', '.join(CUSTOM_SURROGATES) or 'none'}")
    return entry


def is_module_name(text: str) -> bool:
    """Whether ``text`` is an absolute module name: dotted Python identifiers (``pkg.surrogates``)."""
    return isinstance(text, str) and all(part.isidentifier() for part in text.split("."))


def import_outside_cwd(module: str):
    """``importlib.import_module(module)`` with the working directory left off ``sys.path`` (``''``,
    and the folder itself, which ``python -m`` puts first), unless ``PYTHONPATH`` names it: a
    ``module.py`` lying in the folder the user happens to be in is never what they chose."""
    cwd = os.path.realpath(os.getcwd())
    named = {os.path.realpath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    if cwd in named:
        return importlib.import_module(module)
    saved = list(sys.path)
    sys.path[:] = [p for p in saved if os.path.realpath(p or os.curdir) != cwd]
    try:
        return importlib.import_module(module)
    finally:  # what the module itself added stays
        sys.path[:] = saved + [p for p in sys.path if p not in saved]


def surrogate_spec(name: str, option: str = "surrogate") -> str:
    """The name a run folder stores for surrogate ``name`` (:attr:`Surrogate.spec`).  One registered
    by a script (``__main__``) is refused: the run folder could only name it bare, which ``--resume``,
    ``plif eval``, ``stats`` and ``export`` would then call unknown (issue 45)."""
    entry = get_surrogate(name, option)
    if entry.module == "__main__":
        raise ValueError(f"{option} {entry.name!r}: registered by a script (__main__), so a run folder could only "
                         f"name it {entry.name!r}, which --resume, plif eval, stats and export cannot find; move the "
                         f"register_surrogate call into a module (installed or on PYTHONPATH) and name it "
                         f"MODULE:{entry.name}")
    return entry.spec


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
