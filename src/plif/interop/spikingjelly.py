"""``plif.from_spikingjelly(model)``: a SpikingJelly 2.0 ``activation_based`` model, multi-step, as a
plif model computing the same function at plif's speed.

The module tree is kept: containers and the model's own ``forward``s (a SEW ``BasicBlock``'s
``self.sn1(self.bn1(self.conv1(x)))`` plus its shortcut) run as written, on the same ``[T, B, ...]``
tensors, and only the leaves are replaced:

- ``layer.Conv2d``, ``Conv1d``, ``BatchNorm2d``, ``BatchNorm1d``, ``MaxPool2d``, ``AvgPool2d``,
  ``AdaptiveAvgPool2d``, ``Linear``, ``Flatten`` -> :class:`plif.layers.TimeFolded` of the ``torch.nn`` layer
  (:mod:`.sj_layers`);
  ``SeqToANNContainer`` -> an ``nn.Sequential`` of its layers, each time-folded;
- ``layer.Dropout`` -> :class:`plif.layers.TimeInvariantDropout` (both draw one mask per sample,
  scaled by ``1/(1-p)``, and keep it over ``T``); ``layer.VotingLayer`` -> :class:`plif.layers.Voting`;
- ``neuron.IFNode``, ``LIFNode``, ``ParametricLIFNode`` -> ``IF``, ``LIF``, ``PLIF`` (:mod:`.sj_neurons`,
  which states the equations and the surrogates);
- ``layer.SpikingSelfAttention``, ``QKAttention`` (token, channel), ``SpikeDrivenSelfAttention`` -> plif's
  layers of :mod:`plif.layers.attention` (:mod:`.sj_attention`), holding the converted children;
- plain ``torch.nn`` modules are kept as they are (they ran on the same tensors in SpikingJelly).

The parameters and buffers (BatchNorm's running statistics included) are copied, or with
``share=True`` are the SpikingJelly model's own objects.  Then ``plif.fuse`` runs every
conv -> BN -> neuron chain as plif's fused block.  Anything without an exact counterpart is refused
with :class:`ConversionError`, one line naming the module's path and the attribute; so is a neuron
module that one forward calls twice (SpikingJelly carries its potential into the second call, plif's
neuron starts each call from rest).

Exactness (tests/interop/test_spikingjelly_exact.py): in float64, with dropout off, the outputs and
every parameter's gradient are within 1e-9 of SpikingJelly's, relative to each tensor's largest value.
"""
from __future__ import annotations

import copy

from torch import nn

from .sj_attention import convert_attention
from .sj_layers import convert_layer
from .sj_neurons import convert_neuron

__all__ = ["from_spikingjelly", "ConversionError", "NEEDS"]

NEEDS = "plif.from_spikingjelly needs SpikingJelly 2.0 (pip install 'plif[spikingjelly]')"


class ConversionError(ValueError):
    """A SpikingJelly module (or setting) plif has no exact counterpart for; the message names its path."""


def _refuse(path: str, attribute: str, why: str):
    raise ConversionError(f"{path or '<model>'}: {attribute} {why}")


def _check_step_mode(model: nn.Module) -> None:
    """Every SpikingJelly module outside a ``SeqToANNContainer`` in multi-step mode."""
    inside = set()
    for path, m in model.named_modules():
        if type(m).__name__ == "SeqToANNContainer":
            inside.update(id(c) for c in m.modules() if c is not m)
        if id(m) in inside or not type(m).__module__.startswith("spikingjelly"):
            continue
        mode = getattr(m, "step_mode", "m")
        if mode != "m":
            _refuse(path, "step_mode", f"is {mode!r} (single-step); plif converts multi-step models: call "
                    "spikingjelly.activation_based.functional.set_step_mode(model, 'm') first")


def _load(model: nn.Module, state_dict: dict) -> None:
    """``model.load_state_dict(state_dict)``, or one line saying which keys and shapes do not match."""
    own = model.state_dict()
    missing = sorted(set(own) - set(state_dict))
    unexpected = sorted(set(state_dict) - set(own))
    shapes = [f"{k} {list(state_dict[k].shape)} != {list(own[k].shape)}" for k in own
              if k in state_dict and tuple(state_dict[k].shape) != tuple(own[k].shape)]

    def few(keys):
        return ", ".join(keys[:3]) + (f" (+{len(keys) - 3} more)" if len(keys) > 3 else "")

    problems = [f"missing {few(missing)}"] * bool(missing) + [f"unexpected {few(unexpected)}"] * bool(unexpected)
    problems += [f"shape {few(shapes)}"] * bool(shapes)
    if problems:
        raise ConversionError("state dict does not match the SpikingJelly model: " + "; ".join(problems))
    model.load_state_dict(state_dict)


def _convert(module: nn.Module, prefix: str) -> nn.Module:
    """``module`` with every SpikingJelly leaf below it replaced (in place); returns the replacement."""
    new = convert_neuron(module, prefix, _refuse)
    if new is None:
        new = convert_layer(module, prefix, _refuse)
    if new is not None:
        return new
    from spikingjelly.activation_based import base, surrogate

    stateful = isinstance(module, (base.MemoryModule, base.StepModule, surrogate.SurrogateFunctionBase))
    if stateful or (type(module).__module__.startswith("spikingjelly") and not len(module._modules)):
        _refuse(prefix, type(module).__name__, "has no plif counterpart")
    for key, child in list(module._modules.items()):
        if child is not None:
            module._modules[key] = _convert(child, f"{prefix}.{key}" if prefix else key)
    attention = convert_attention(module, prefix, _refuse)  # holds the children just converted
    return module if attention is None else attention


def _refuse_repeated(path: str, calls: int, where: str) -> None:
    _refuse(path, "is called", f"{calls} times in one forward ({where}): SpikingJelly carries the neuron's "
            "potential from one call into the next, plif starts each call from rest; give each call its own "
            "neuron module")


def _check_shared(model: nn.Module) -> None:
    """Refuse a SpikingJelly stateful module (a neuron) that sits at two paths of ``model``: one forward
    calls it twice (before conversion, which would give each path its own neuron)."""
    from spikingjelly.activation_based import base

    paths: dict[int, list[str]] = {}
    for path, m in model.named_modules(remove_duplicate=False):
        if isinstance(m, base.MemoryModule):
            paths.setdefault(id(m), []).append(path)
    for where in paths.values():
        if len(where) > 1:
            _refuse_repeated(where[0], len(where), f"at {', '.join(where)}")


def _check_called_once(model: nn.Module) -> None:
    """Refuse a neuron module of the converted ``model`` that one forward calls twice: SpikingJelly carries
    its potential from the first call into the second, plif's neuron starts each call from rest.  Found
    by tracing ``model`` as :func:`plif.fuse` does; a module FX cannot trace is looked into child by
    child (a second call hidden inside such a forward is not seen)."""
    from ..models.fusion import traced_calls
    from ..neurons import SpikingNeuron

    calls: dict[int, list[str]] = {}

    def walk(module: nn.Module, prefix: str) -> None:
        names = traced_calls(module) if module._modules and not isinstance(module, SpikingNeuron) else []
        if names is None:
            for key, child in module.named_children():
                walk(child, f"{prefix}.{key}" if prefix else key)
            return
        for name in names:
            if isinstance(module.get_submodule(name), SpikingNeuron):
                calls.setdefault(id(module.get_submodule(name)), []).append(f"{prefix}.{name}" if prefix else name)

    walk(model, "")
    for names in calls.values():
        if len(names) > 1:
            _refuse_repeated(names[0], len(names), "traced")


def from_spikingjelly(model: nn.Module, *, state_dict: dict | None = None, share: bool = False,
                      fuse: bool = True, memory: str = "fused") -> nn.Module:
    """The plif model computing what SpikingJelly 2.0 ``model`` (multi-step) computes; ``model``'s modules are
    left as they were.

    - state_dict: a SpikingJelly checkpoint to load first (its keys are ``model``'s, not plif's).
    - share: the plif model holds ``model``'s own parameter and buffer tensors (training one trains
      the other, and a ``state_dict`` is loaded into both) instead of copies.
    - fuse, memory: run ``plif.fuse(converted, memory=memory)`` (``memory`` as ``plif train --memory``).

    The plif model starts every forward from rest (``V_reset``); SpikingJelly keeps its state until
    ``functional.reset_net``: the two agree when that is called before each sample, as SpikingJelly's
    training loops do.  Input ``[T, B, ...]``, output as the SpikingJelly model's.

    Example (needs SpikingJelly):

        from spikingjelly.activation_based import functional, neuron, surrogate
        from spikingjelly.activation_based.model.parametric_lif_net import FashionMNISTNet
        sj = FashionMNISTNet(spiking_neuron=neuron.ParametricLIFNode, surrogate_function=surrogate.ATan(),
                             detach_reset=True)
        functional.set_step_mode(sj, "m")
        net = plif.from_spikingjelly(sj)     # [T, B, 1, 28, 28] -> [T, B, 10], the same numbers
    """
    try:
        import spikingjelly.activation_based.base  # noqa: F401
    except Exception as e:  # noqa: BLE001  (a broken optional install raises more than ImportError)
        raise ImportError(f"{NEEDS}: {type(e).__name__}: {e}") from e
    if not isinstance(model, nn.Module):
        raise TypeError(f"from_spikingjelly takes a torch.nn.Module, got {type(model).__name__}")
    _check_step_mode(model)
    memo = {}
    if share:
        memo.update({id(t): t for t in (*model.parameters(), *model.buffers())})
    converted = copy.deepcopy(model, memo)
    _check_shared(converted)
    if state_dict is not None:
        _load(converted, state_dict)
    converted = _convert(converted, "")
    _check_called_once(converted)
    if fuse:
        from ..models.fusion import fuse as plif_fuse

        converted = plif_fuse(converted, memory=memory)
    return converted
