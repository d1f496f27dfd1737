"""IF, LIF and PLIF layers: thin modules wiring a time constant into :func:`multi_step`.

Every layer takes ``x [T, B, ...]`` (multi-step) and starts from the rest potential unless a
state is passed in, so there is no hidden state to forget to reset between samples.  ``step``
is the single-step form: ``(x_t [B, ...], v or None) -> (S_t, V_t)``.

Shape checks (only what a layer can know, so never a false alarm): every layer needs at least
``[T, B]``; a per-channel PLIF (``num_channels=C``) needs the channel at dim 2, ``[T, B, C, ...]``
(``x_t [B, C, ...]`` in ``step``), and names the likely mistake when ``C`` sits at dim 1 (a
``[B, C, H, W]`` tensor without its time dimension).  A layer with one τ cannot tell
``[B, C, H, W]`` from a valid ``[T, B, C, L]``: networks built by :mod:`plif.models` check their
input shape at the entry, standalone layers rely on the caller putting time first.
"""
from __future__ import annotations

import math
import numbers

import torch
from torch import nn

from ..kernel_table import load_ahead
from .dispatch import check_backend, load_backends, multi_step
from .foreign_args import unknown_arguments
from .functional import NeuronConfig, neuron_step, state_dtype
from .reference import multi_step_potentials

__all__ = ["SpikingNeuron", "IF", "LIF", "PLIF", "NEURONS", "make_neuron", "tau_to_w", "check_tau", "MAX_TAU"]

MAX_TAU = 1e30  # 1/τ stays a normal float32 (and PLIF's sigmoid(w) with it); 1e30 steps is no leak at all
"""The largest τ (and τ0) accepted: 1e30 steps, i.e. no leak at all, with 1/τ still a normal float32."""


def check_tau(tau, name: str = "tau") -> float:
    """``tau`` as a float when a neuron can run with it: greater than 1 time-step and at most
    :data:`MAX_TAU`; else ``ValueError`` naming ``name`` (the layers', the zoo's and the training
    config's one check)."""
    if isinstance(tau, bool) or not isinstance(tau, numbers.Real) or not 1 < tau <= MAX_TAU:  # NaN fails too
        raise ValueError(f"{name} must be greater than 1 and at most {MAX_TAU:g} time-steps (the membrane keeps "
                         f"1 - 1/tau of its potential each step), got {tau!r}")
    return float(tau)


def tau_to_w(tau: float) -> float:
    """``w0 = -log(τ0 - 1)`` so that ``1/sigmoid(w0) = τ0`` (τ0 = 2 gives 0)."""
    return -math.log(check_tau(tau) - 1)


class SpikingNeuron(nn.Module):
    """Base layer: subclasses say whether they leak and provide ``k()`` (``1/τ``).

    Called on ``x [T, B, ...]`` it returns spikes ``[T, B, ...]`` (same dtype), starting every
    neuron at the rest potential unless ``v0 [B, ...]`` is given; :meth:`step` runs one time-step.

    - v_threshold: ``V_th``; v_reset: the hard-reset potential, or ``None`` for soft reset.
    - detach_reset: cut the reset out of the backward graph (the paper's default).
    - surrogate, alpha: a name in :data:`plif.surrogate.SURROGATES` or one added by
      :func:`plif.surrogate.register_surrogate`, and its sharpness (``None``: the surrogate's default).
    - backend: ``auto`` or a name in :data:`plif.neurons.BACKENDS` (all compute the same
      dynamics; the fused ones are tested against ``reference``).

    SpikingJelly's argument names (``init_tau``, ``surrogate_function``, ``step_mode``, ``decay_input``,
    ``store_v_seq``) are refused with plif's spelling (:mod:`plif.neurons.foreign_args`), never mapped.
    """

    leak = True

    def __init__(self, v_threshold: float = 1.0, v_reset: float | None = 0.0, detach_reset: bool = True,
                 surrogate: str = "atan", alpha: float | None = None, backend: str = "auto", **unknown):
        if unknown:
            raise unknown_arguments(type(self), unknown)
        super().__init__()
        self.cfg = NeuronConfig(leak=self.leak, v_threshold=v_threshold, v_reset=v_reset,
                                detach_reset=detach_reset, surrogate=surrogate, alpha=alpha)
        check_backend(backend, surrogate=surrogate)
        self.backend = backend
        if backend != "reference" and backend != "bptt":
            load_ahead(load_backends)  # import the fused kernels now, never inside a torch.compile trace

    def k(self, x: torch.Tensor) -> torch.Tensor:
        """``1/τ`` as a tensor broadcastable to one step of ``x`` (``x`` is ``[T, B, ...]``), in the
        state's dtype (fp32 for bf16 inputs under autocast: ``k`` is not rounded to bf16)."""
        return torch.ones((), dtype=state_dtype(x.dtype), device=x.device)

    def forward(self, x: torch.Tensor, v0: torch.Tensor | None = None, return_state: bool = False):
        """``x [T, B, ...]`` -> spikes ``[T, B, ...]`` (and ``V_{T-1} [B, ...]`` with ``return_state``)."""
        spikes, v = multi_step(x, self.k(x), v0, self.cfg, self.backend)
        return (spikes, v) if return_state else spikes

    def potentials(self, x: torch.Tensor, v0: torch.Tensor | None = None):
        """``x [T, B, ...]`` -> ``(spikes [T, B, ...], V [T, B, ...])``, ``V[t]`` the potential after step
        ``t``'s reset: the reference loop (:func:`~plif.neurons.reference.multi_step_potentials`, the
        spec every backend is tested against), whatever ``backend`` is; the fused kernels keep no
        potential but the last.  ``V`` is in :func:`~plif.neurons.functional.state_dtype` (fp32 for
        bf16 input), the spikes in ``x``'s dtype.  :class:`plif.monitor.PotentialMonitor` calls it."""
        if x.dim() < 2:
            raise ValueError(f"multi-step input must be [T, B, ...], got shape {tuple(x.shape)}")
        k, dtype = self.k(x), state_dtype(x.dtype)
        if v0 is not None and v0.shape != x.shape[1:]:
            v0 = v0.expand(x.shape[1:])
        spikes, v = multi_step_potentials(x.to(dtype), k, None if v0 is None else v0.to(dtype), self.cfg)
        return spikes.to(x.dtype), v

    def step(self, x_t: torch.Tensor, v: torch.Tensor | None = None):
        """Single step: ``x_t [B, ...]`` -> ``(S_t, V_t)``; pass the returned ``V_t`` back in."""
        return neuron_step(x_t, v, self.k(x_t.unsqueeze(0)), self.cfg)

    def extra_repr(self) -> str:
        c = self.cfg
        reset = f"v_reset={c.v_reset}" if c.hard_reset else "soft_reset"
        return (f"v_threshold={c.v_threshold}, {reset}, detach_reset={c.detach_reset}, "
                f"surrogate={c.surrogate}(alpha={c.alpha})")


class IF(SpikingNeuron):
    """Integrate-and-fire: ``H_t = V_{t-1} + X_t`` (no leak).

    Example: half the threshold at every step fires every second step (input ``[T, B, N]``):

    >>> import torch
    >>> from plif import IF
    >>> IF()(torch.full((4, 1, 1), 0.5)).flatten().tolist()
    [0.0, 1.0, 0.0, 1.0]
    """

    leak = False


class LIF(SpikingNeuron):
    """Leaky integrate-and-fire with a fixed ``τ > 1``: ``k = 1/τ``.

    Example: ``H_t = V_{t-1} + (X_t - V_{t-1}) / τ`` reaches the threshold 1 at the second step of a
    constant 1.5 (0.75, then 1.125), fires and resets to 0:

    >>> import torch
    >>> from plif import LIF
    >>> LIF(tau=2.0)(torch.full((4, 1, 1), 1.5)).flatten().tolist()
    [0.0, 1.0, 0.0, 1.0]
    """

    def __init__(self, tau: float = 2.0, **kwargs):
        super().__init__(**kwargs)
        self.tau = check_tau(tau, "LIF tau")

    def k(self, x):
        # a fill kernel, not a host-to-device copy: keeps the step capturable in a CUDA graph
        return torch.full((), 1.0 / self.tau, dtype=state_dtype(x.dtype), device=x.device)

    def extra_repr(self):
        return f"tau={self.tau}, " + super().extra_repr()


class PLIF(SpikingNeuron):
    """Parametric LIF: ``k = sigmoid(w)``, ``τ = 1/k``, with ``w`` learnt.

    ``num_channels=None`` shares one ``w`` across the layer (the paper); an integer gives one
    ``w`` per channel, the channel being dim 2 of ``[T, B, C, ...]``.

    Example: over all T steps at once, or one step at a time; the spikes' surrogate gradient reaches
    ``w``, so τ is learnt with the weights:

    >>> import torch
    >>> from plif import PLIF
    >>> neuron = PLIF(tau0=2.0)
    >>> x = torch.full((4, 1, 1), 1.5)                   # [T, B, N], time first
    >>> spikes, v_last = neuron(x, return_state=True)    # starts at rest: no state to reset
    >>> spikes.flatten().tolist(), neuron.tau
    ([0.0, 1.0, 0.0, 1.0], tensor(2.))
    >>> spikes.sum().backward()
    >>> neuron.w.grad is not None
    True
    >>> s, v = neuron.step(x[0])                         # single step: pass v back in
    >>> s, v = neuron.step(x[1], v)
    >>> s.item()
    1.0
    >>> PLIF(num_channels=3)(torch.rand(4, 2, 3, 8, 8)).shape   # one tau per channel, at dim 2
    torch.Size([4, 2, 3, 8, 8])
    """

    def __init__(self, tau0: float = 2.0, num_channels: int | None = None, **kwargs):
        super().__init__(**kwargs)
        if num_channels is not None and (isinstance(num_channels, bool) or not isinstance(num_channels, numbers.Integral)
                                         or num_channels < 1):
            raise ValueError(f"PLIF num_channels must be a positive integer or None, got {num_channels!r}")
        shape = () if num_channels is None else (int(num_channels),)
        self.tau0 = check_tau(tau0, "PLIF tau0")
        self.w = nn.Parameter(torch.full(shape, tau_to_w(self.tau0)))

    @property
    def tau(self) -> torch.Tensor:
        """The current membrane time constant(s), ``1/sigmoid(w)`` (detached)."""
        return 1.0 / torch.sigmoid(self.w.detach())

    def k(self, x):
        k = torch.sigmoid(self.w).to(state_dtype(x.dtype))
        if k.dim() == 1:
            self._check_channels(x)
            k = k.view(-1, *([1] * (x.dim() - 3)))
        return k

    def step(self, x_t: torch.Tensor, v: torch.Tensor | None = None):
        if self.w.dim() == 1:
            self._check_channels(x_t, in_step=True)
        return super().step(x_t, v)

    def _check_channels(self, x: torch.Tensor, in_step: bool = False) -> None:
        """``x [T, B, C, ...]`` (``x_t [B, C, ...]`` in ``step``) with ``C = num_channels``."""
        c, dim = self.w.numel(), 1 if in_step else 2
        if x.dim() > dim and x.shape[dim] == c:
            return
        if in_step:
            msg = (f"per-channel PLIF(num_channels={c}).step takes x_t [B, {c}, ...], channel at dim 1; "
                   f"got x_t of shape {list(x.shape)}")
        else:
            msg = (f"per-channel PLIF(num_channels={c}) takes x [T, B, {c}, ...], time first and the channel at "
                   f"dim 2; got x of shape {list(x.shape)}")
            if x.dim() >= 2 and x.shape[1] == c:
                msg += f": it looks like [B, {c}, ...] without its time dimension (one step: x.unsqueeze(0) or step())"
        raise ValueError(msg)

    def extra_repr(self):
        tau = self.tau
        if tau.is_meta:  # built without weights (plif spec): nothing learnt to show
            learnt = f"tau0={self.tau0:.4g} ({'per-layer' if tau.dim() == 0 else f'per-channel[{tau.numel()}]'})"
        elif tau.dim() == 0:
            learnt = f"tau={float(tau):.4g} (per-layer, tau0={self.tau0:.4g})"
        else:
            learnt = (f"tau={float(tau.min()):.4g}..{float(tau.max()):.4g} mean {float(tau.mean()):.4g} "
                      f"(per-channel[{tau.numel()}], tau0={self.tau0:.4g})")
        return learnt + ", " + super().extra_repr()


# The one list of neuron names: the notation's tokens, --neuron's choices and make_neuron read it.
NEURONS: dict[str, type[SpikingNeuron]] = {"PLIF": PLIF, "LIF": LIF, "IF": IF}
"""The neuron layers by the names the network notation uses (``IF``, ``LIF``, ``PLIF``)."""


def make_neuron(name: str, tau: float = 2.0, **kwargs) -> SpikingNeuron:
    """Build a neuron layer by name (``IF``, ``LIF``, ``PLIF``, any case); ``tau`` is τ (LIF) or τ0 (PLIF)."""
    key = name.upper()
    if key not in NEURONS:
        raise ValueError(f"unknown neuron {name!r}; valid: {', '.join(NEURONS)}")
    if key == "LIF":
        return LIF(tau=tau, **kwargs)
    if key == "PLIF":
        return PLIF(tau0=tau, **kwargs)
    return IF(**kwargs)
