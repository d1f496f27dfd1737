"""Figures 1(b) and 2 of the paper, computed with the project's own LIF neuron.

One step is ``dt = 1 ms``.  The neuron's threshold is set to ``+inf`` so it never fires: the
figures show sub-threshold dynamics only, as the paper's do.  Step ``n = 1, 2, ...`` takes input
``X_n`` and yields ``V(n ms)``; ``V(0) = 0`` (the rest potential).

Closed forms of the discrete recursion ``V_n = V_{n-1} + (X_n - V_{n-1}) / tau`` with ``V_0 = 0``:

    constant input X_n = wI:       V_n = wI (1 - (1 - 1/tau)^n)
    input spikes X_n = w [n in S]: V_n = sum_{s in S, s <= n} (w / tau) (1 - 1/tau)^(n - s)

which approach the continuous ``V(t) = wI (1 - e^{-t/tau})`` and ``sum (w/tau) e^{-(t-s)/tau}``
as ``tau`` (in steps) grows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from ..neurons import LIF

__all__ = ["Variant", "VARIANTS", "SPIKE_TIMES_MS", "lif_potential", "constant_input_closed_form",
           "spike_input_closed_form", "constant_input_continuous", "constant_input_curves",
           "spike_input_curves", "plot_neuron_figures"]

SPIKE_TIMES_MS = (5, 80, 85, 90)


@dataclass(frozen=True)
class Variant:
    """One curve: the synaptic weight ``w`` and membrane time constant ``tau`` (ms)."""

    name: str
    w: float
    tau: float


# the base curve and one change at a time, as in the paper's figures
VARIANTS = (
    Variant("base", 1.0, 20.0),
    Variant("w+", 1.5, 20.0),
    Variant("w-", 0.5, 20.0),
    Variant("tau+", 1.0, 40.0),
    Variant("tau-", 1.0, 10.0),
)


def lif_potential(x: torch.Tensor, tau: float) -> torch.Tensor:
    """Membrane potential of a never-firing LIF neuron: ``x [N]`` (input per 1 ms step) -> ``V [N + 1]``
    with ``V[0] = 0`` and ``V[n]`` the potential after step ``n``.

    Runs the project's :class:`plif.neurons.LIF` step by step with ``v_threshold = +inf``; a spike
    would mean the threshold did not hold, which is an error here, not a curve.
    """
    neuron = LIF(tau=tau, v_threshold=math.inf)
    x = x.to(torch.float64).reshape(-1, 1)
    v = torch.zeros(1, dtype=torch.float64)
    out = [v]
    with torch.no_grad():
        for x_t in x:
            s, v = neuron.step(x_t, v)
            if bool(s.any()):
                raise RuntimeError("the sub-threshold neuron fired; its threshold must stay at +inf")
            out.append(v)
    return torch.cat(out)


def constant_input_closed_form(w: float, I: float, tau: float, steps: int) -> torch.Tensor:
    """``V_n = wI (1 - (1 - 1/tau)^n)``, ``n = 0..steps``."""
    n = torch.arange(steps + 1, dtype=torch.float64)
    return w * I * (1 - (1 - 1 / tau) ** n)


def constant_input_continuous(w: float, I: float, tau: float, t_ms: torch.Tensor) -> torch.Tensor:
    """The ODE's solution ``V(t) = wI (1 - e^{-t/tau})`` (Eq. 1 with V_rest = 0, V(0) = 0)."""
    return w * I * (1 - torch.exp(-t_ms.to(torch.float64) / tau))


def spike_input_closed_form(w: float, tau: float, spike_times, steps: int) -> torch.Tensor:
    """``V_n = sum_{s <= n} (w / tau) (1 - 1/tau)^(n - s)``, ``n = 0..steps``."""
    n = torch.arange(steps + 1, dtype=torch.float64)
    v = torch.zeros(steps + 1, dtype=torch.float64)
    for s in spike_times:
        v += torch.where(n >= s, (w / tau) * (1 - 1 / tau) ** (n - s).clamp(min=0), torch.zeros(()))
    return v


def constant_input_curves(steps: int = 200, I: float = 1.0, variants=VARIANTS) -> dict:
    """Fig. 1(b): ``{"t_ms": [steps + 1], name: V [steps + 1], ...}`` under ``X_n = wI`` for n >= 1."""
    curves = {"t_ms": torch.arange(steps + 1, dtype=torch.float64)}
    for v in variants:
        curves[v.name] = lif_potential(torch.full((steps,), v.w * I), v.tau)
    return curves


def spike_input_curves(steps: int = 200, spike_times=SPIKE_TIMES_MS, variants=VARIANTS) -> dict:
    """Fig. 2: the same neurons driven by ``X_n = w`` at ``n in spike_times`` and 0 elsewhere."""
    if max(spike_times) > steps:
        raise ValueError(f"spike at t={max(spike_times)} ms lies beyond the {steps} ms simulated")
    curves = {"t_ms": torch.arange(steps + 1, dtype=torch.float64)}
    for v in variants:
        x = torch.zeros(steps, dtype=torch.float64)
        for s in spike_times:
            x[s - 1] = v.w  # step n consumes x[n - 1]
        curves[v.name] = lif_potential(x, v.tau)
    return curves


_STYLE = {"base": ("tab:blue", "-"), "w+": ("tab:red", "--"), "w-": ("tab:red", ":"),
          "tau+": ("tab:green", "--"), "tau-": ("tab:green", ":")}


# both figures: V is in the units of the input X (wI, or the spike amplitude w), with V_rest = 0
YLABEL = "membrane potential $V$ (units of the input $X$)"


def _plot(curves: dict, variants, title: str, path: Path, marks=(), output=None) -> list[Path]:
    from .figures import FigureOutput, new_figure, save_csv, save_figure, save_json

    fig, ax = new_figure(6.4, 4.0)
    ax = ax[0, 0]
    t = curves["t_ms"].tolist()
    for v in variants:
        color, ls = _STYLE.get(v.name, (None, "-"))
        ax.plot(t, curves[v.name].tolist(), color=color, linestyle=ls,
                label=f"{_legend_name(v.name)}: $w$ = {v.w:g}, $\\tau$ = {v.tau:g} ms")
    for s in marks:
        ax.axvline(s, color="0.8", linewidth=0.8, zorder=0)
    ax.set_xlabel("time $t$ (ms), $\\Delta t$ = 1 ms")
    ax.set_ylabel(YLABEL)
    ax.set_title(title + "\nLIF, $V_{\\mathrm{rest}}$ = 0, $V_{\\mathrm{th}}$ = +∞ (sub-threshold: never fires)",
                 fontsize=9)
    ax.legend(fontsize=8)
    written = save_figure(fig, path, output or FigureOutput())
    names = [v.name for v in variants]
    save_csv(path.with_suffix(".csv"), ["t_ms"] + names,
             zip(t, *[curves[n].tolist() for n in names]))
    save_json(path.with_suffix(".json"), {
        "dt_ms": 1.0, "v_threshold": "inf (never fires)", "v_rest": 0.0,
        "variants": [{"name": v.name, "w": v.w, "tau_ms": v.tau} for v in variants],
        "t_ms": t, "V": {n: curves[n].tolist() for n in names}})
    return written


def _legend_name(name: str) -> str:
    """``tau+`` -> ``τ+``: the variant names of the paper's figures, with the Greek letter."""
    return name.replace("tau", "$\\tau$")


def plot_neuron_figures(out: str | Path, steps: int = 200, variants=VARIANTS, output=None) -> list[Path]:
    """Write ``fig1b_constant_input`` and ``fig2_input_spikes`` to ``out``, each in the formats of
    ``output`` (a :class:`~plif.experiments.figures.FigureOutput`; PNG by default) with its data as
    ``.csv`` and ``.json``; returns the figure files."""
    out = Path(out)
    p1 = out / "fig1b_constant_input.png"
    p2 = out / "fig2_input_spikes.png"
    return (_plot(constant_input_curves(steps, variants=variants), variants,
                  "Fig. 1(b): constant input $X = wI$ from $t$ = 0 ($I$ = 1)", p1, output=output)
            + _plot(spike_input_curves(steps, variants=variants), variants,
                    f"Fig. 2: input spikes $X = w$ at $t$ = {', '.join(map(str, SPIKE_TIMES_MS))} ms", p2,
                    SPIKE_TIMES_MS, output=output))
