"""SpikingJelly 2.0 neurons and surrogates as plif's: the one table of what has an exact counterpart.

SpikingJelly's charge, with ``V_reset`` read as 0 under soft reset (``v_reset=None``):

    IFNode                         H = V + X
    LIFNode / ParametricLIFNode    H = V + (X - (V - V_reset)) / τ      (decay_input=True)
                                   H = V - (V - V_reset) / τ + X        (decay_input=False)

and plif's (:mod:`plif.neurons.functional`) is the first two: ``decay_input=False`` has no
counterpart and is refused.  Fire ``S = Θ(H - V_th)`` (``Θ(0) = 1`` in both), hard reset
``V = H (1 - S) + V_reset S``, soft reset ``V = H - V_th S``, ``detach_reset`` the same; both start
every sample from ``V_reset`` (0 under soft reset), SpikingJelly after ``functional.reset_net``.
``ParametricLIFNode.w`` is plif's ``PLIF.w`` (``1/τ = sigmoid(w)``), shared or copied as it is.

Surrogates (backward only; both forwards are the exact step):

    ATan(α)                 plif atan(α)        (α/2) / (1 + (π/2 α x)²)
    Sigmoid(α)              plif sigmoid(α)     α s (1 - s), s = sigmoid(α x)
    PiecewiseQuadratic(α)   plif triangle(α)    max(0, α - α² |x|)
    Rect(α)                 plif rect(2α)       α where |x| < 1/(2α)
"""
from __future__ import annotations

from ..neurons import IF, LIF, PLIF
from ..neurons.modules import MAX_TAU

__all__ = ["SURROGATES", "convert_neuron", "surrogate_of"]

# SpikingJelly class name -> (plif surrogate name, alpha map)
SURROGATES = {
    "ATan": ("atan", lambda a: a),
    "Sigmoid": ("sigmoid", lambda a: a),
    "PiecewiseQuadratic": ("triangle", lambda a: a),
    "Rect": ("rect", lambda a: 2 * a),
}
"""The SpikingJelly surrogates plif computes exactly, by class name: ``(plif name, alpha -> plif alpha)``."""


def surrogate_of(sg, path: str, refuse) -> tuple[str, float]:
    """``(plif surrogate, alpha)`` for the SpikingJelly surrogate module ``sg`` of the neuron at ``path``."""
    from spikingjelly.activation_based import surrogate as sj_surrogate

    name = type(sg).__name__
    if name not in SURROGATES or type(sg) is not getattr(sj_surrogate, name):
        refuse(path, "surrogate_function", f"{name} has no plif counterpart (plif has {', '.join(SURROGATES)})")
    if not getattr(sg, "spiking", True):
        refuse(path, "surrogate_function", f"{name}(spiking=False) forwards its primitive, not spikes")
    plif_name, alpha = SURROGATES[name]
    return plif_name, float(alpha(float(sg.alpha)))


def _check_common(m, path: str, refuse) -> None:
    if getattr(m, "store_v_seq", False):
        refuse(path, "store_v_seq", "True: plif's neurons keep no voltage sequence; convert it with "
               "store_v_seq=False and record V with plif.monitor.PotentialMonitor(net)")
    if getattr(m, "_neuron_precision", None) is not None:
        refuse(path, "_neuron_precision", "a Triton-only mixed-precision setting has no plif counterpart")
    if getattr(m, "backend", "torch") == "cupy":
        refuse(path, "backend", "'cupy' is a CuPy-only setting; plif runs its own kernels")
    if getattr(m, "decay_input", True) is not True:
        refuse(path, "decay_input", "False (H = V - (V - V_reset)/tau + X) has no plif counterpart; "
               "plif charges H = V + (X - (V - V_reset))/tau")


def convert_neuron(m, path: str, refuse):
    """The plif neuron computing what SpikingJelly's ``IFNode``/``LIFNode``/``ParametricLIFNode`` ``m``
    computes; a ``ParametricLIFNode``'s ``w`` is the same parameter object.  ``None`` for any other type."""
    from spikingjelly.activation_based import neuron as sj_neuron

    kind = type(m).__name__
    if kind not in ("IFNode", "LIFNode", "ParametricLIFNode") or type(m) is not getattr(sj_neuron, kind):
        return None  # a subclass (ILIFNode, a user's) may change the equations: refused by the caller
    _check_common(m, path, refuse)
    surrogate, alpha = surrogate_of(m.surrogate_function, path, refuse)
    kw = dict(v_threshold=float(m.v_threshold), v_reset=None if m.v_reset is None else float(m.v_reset),
              detach_reset=bool(m.detach_reset), surrogate=surrogate, alpha=alpha)
    try:
        if kind == "IFNode":
            return IF(**kw)
        if kind == "LIFNode":
            return LIF(tau=float(m.tau), **kw)
        if m.w.dim() != 0:
            refuse(path, "w", f"a w of shape {list(m.w.shape)} (plif's PLIF takes one w per layer here)")
        tau0 = min(1.0 / float(m.w.detach().double().sigmoid()), MAX_TAU)
        neuron = PLIF(tau0=max(tau0, 1.0 + 1e-12), **kw)
    except ValueError as e:
        refuse(path, type(m).__name__, str(e))
    neuron._parameters["w"] = m.w  # the learnt w itself, not its rounding through tau0
    return neuron
