"""What a :class:`~plif.models.SpikingNetwork` checks about what it is given, before any layer runs.

Every check compares types, dtypes, devices or shapes: no value is read, so none adds a host
synchronisation or a data-dependent branch to a training step (under ``torch.compile`` and CUDA
graphs a shape is static).  A refusal is one line that names what was given and what was expected.

- ``x`` must be a floating-point ``torch.Tensor`` on the network's device, in the network's dtype
  (under autocast any floating dtype: autocast casts it).  Integer frames are refused rather than
  converted: an integer tensor may hold event counts (``x.float()``) or 8-bit pixels
  (``x.float() / 255``), and only the caller knows which.
- A ``[T, B, ...]`` tensor whose dim 0 is not the network's ``T`` while dim 1 is looks batch-first
  (``[B, T, ...]``, Tonic's and snnTorch's layout), which would silently run as ``B`` samples of
  ``T`` swapped: refused unless the caller says which (``time_first``).
- A :class:`~plif.models.NetworkState` must be one of this network's: one potential per neuron
  layer and one mask per dropout layer, shaped ``[B, *that layer's output]`` for this batch, on
  ``x``'s device.
"""
from __future__ import annotations

import itertools
import numbers

import torch
from torch import nn

from ..layers.repeated import repeat_over_time
from .stepping import NetworkState

__all__ = ["reference_tensor", "check_tensor", "to_time_first", "is_static", "repeat_over_time", "check_state"]


def reference_tensor(module: nn.Module) -> torch.Tensor | None:
    """The first parameter (or buffer) of ``module``: what its dtype and device are; ``None`` when it has neither."""
    return next(itertools.chain(module.parameters(), module.buffers()), None)


def _shape(shape) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def check_tensor(x, where: str, ref: torch.Tensor | None) -> None:
    """Refuse ``x`` unless it is a floating tensor on ``ref``'s device and in its dtype (any
    floating dtype under autocast).  ``where`` names the call (``net(x)``, ``net.step(x_t)``)."""
    if not isinstance(x, torch.Tensor):
        hint = "; convert it with torch.from_numpy(x)" if type(x).__module__ == "numpy" else ""
        raise TypeError(f"{where}: expected a torch.Tensor, got {type(x).__module__}.{type(x).__qualname__}{hint}")
    if not (x.is_floating_point()):
        want = ref.dtype if ref is not None else torch.float32
        raise TypeError(f"{where}: x is {x.dtype}, but the network computes in {want}: convert it, "
                        f"x.to({want}) for event counts or x.to({want}) / 255 for 8-bit pixels")
    if ref is None:
        return
    if x.device != ref.device:
        raise ValueError(f"{where}: x is on {x.device}, but the network is on {ref.device}; move one: "
                         f"x.to('{ref.device}') or net.to('{x.device}')")
    if x.dtype != ref.dtype and ref.is_floating_point() and not torch.is_autocast_enabled(x.device.type):
        raise TypeError(f"{where}: x is {x.dtype}, but the network's parameters are {ref.dtype}; convert one: "
                        f"x.to({ref.dtype}) or net.to({x.dtype})")


def to_time_first(x: torch.Tensor, input_shape: tuple, T: int, time_first: bool | None) -> torch.Tensor:
    """``x [B, *input_shape]`` (a static image) unchanged, or frames as ``[T', B, *input_shape]``.

    ``time_first``: ``True`` takes frames as ``[T', B, ...]`` (any ``T'``), ``False`` as
    ``[B, T', ...]`` (returned transposed, a view); ``None`` takes ``[T', B, ...]`` but refuses a
    tensor whose dim 0 is not ``T`` while dim 1 is, which looks batch-first."""
    if time_first is not None and not isinstance(time_first, bool):  # 0 == False: ``in`` took 0 as time-first
        raise TypeError(f"net(x, time_first=...): True ([T, B, ...]), False ([B, T, ...]) or None, got {time_first!r}")
    n, shape = len(input_shape), tuple(x.shape)
    if x.dim() == n + 1:
        if shape[1:] != input_shape:
            raise ValueError(f"net(x): expected a static input [B, {_shape(input_shape)[1:]}, got {_shape(shape)}")
        return x
    if x.dim() != n + 2:
        raise ValueError(f"net(x): expected [B, ...] (static) or [T, B, ...] frames of per-sample shape "
                         f"{_shape(input_shape)}, got {_shape(shape)} ({x.dim()} dims)")
    order = "[B, T, " if time_first is False else "[T, B, "
    if shape[2:] != input_shape:
        raise ValueError(f"net(x): expected frames {order}{_shape(input_shape)[1:]}, got {_shape(shape)}")
    if time_first is None and shape[0] != T and shape[1] == T:
        raise ValueError(f"net(x): x {_shape(shape)} looks batch-first [B, T, ...] (this network's T is {T}): pass "
                         f"net(x, time_first=False) for {shape[0]} samples of {T} steps, or net(x, time_first=True) "
                         f"for {shape[1]} samples of {shape[0]} steps")
    return x.transpose(0, 1) if time_first is False else x


def is_static(x: torch.Tensor, input_shape: tuple) -> bool:
    """Whether ``x`` is a static input ``[B, *input_shape]`` (one sample, the same at every step)
    rather than frames ``[T, B, *input_shape]``: a shape test, nothing read."""
    return x.dim() == len(input_shape) + 1


def check_state(state, neuron_shapes: list[tuple], mask_shapes: list[tuple], x_t: torch.Tensor,
                ref: torch.Tensor | None) -> None:
    """Refuse ``state`` unless it fits this network and ``x_t [B, ...]``: a :class:`NetworkState`
    with one potential per shape of ``neuron_shapes`` and one mask per ``mask_shapes`` (per-sample
    shapes), each ``None`` or ``[B, *shape]`` on ``x_t``'s device."""
    if not isinstance(state, NetworkState):
        raise TypeError(f"net.step(x_t, state): state must be the NetworkState that net.initial_state() or the "
                        f"previous net.step() returned, got {type(state).__qualname__}")
    if isinstance(state.t, bool) or not isinstance(state.t, numbers.Integral) or state.t < 0:
        raise ValueError(f"net.step(x_t, state): the state's t (steps taken, 0 or more) is {state.t!r}; start with "
                         "net.initial_state()")
    for what, got, shapes in (("potential", state.potentials, neuron_shapes), ("dropout mask", state.masks, mask_shapes)):
        if not isinstance(got, tuple) or len(got) != len(shapes):
            n = len(got) if isinstance(got, tuple) else type(got).__qualname__
            raise ValueError(f"net.step(x_t, state): the state holds {n} {what}s, this network has {len(shapes)}: "
                             "it is another network's; start with net.initial_state()")
        for i, (v, shape) in enumerate(zip(got, shapes)):
            if v is None:
                continue
            if not isinstance(v, torch.Tensor):
                raise TypeError(f"net.step(x_t, state): the state's {what} {i} is a {type(v).__qualname__}, not a tensor")
            if tuple(v.shape[1:]) != shape:
                raise ValueError(f"net.step(x_t, state): the state's {what} {i} is {_shape(v.shape)}, this network's is "
                                 f"[B, {_shape(shape)[1:]}: it is another network's; start with net.initial_state()")
            if v.shape[0] != x_t.shape[0]:
                raise ValueError(f"net.step(x_t, state): the state is for a batch of {v.shape[0]}, but x_t has "
                                 f"{x_t.shape[0]} samples; start a new stream with net.initial_state()")
            if v.device != x_t.device:
                raise ValueError(f"net.step(x_t, state): the state is on {v.device}, x_t on {x_t.device}; "
                                 f"move it with state.to('{x_t.device}')")
            if (ref is not None and v.dtype != ref.dtype and ref.is_floating_point()
                    and not torch.is_autocast_enabled(x_t.device.type)):
                raise TypeError(f"net.step(x_t, state): the state's {what} {i} is {v.dtype}, the network's parameters "
                                f"{ref.dtype}; convert it with state.to({ref.dtype})")
