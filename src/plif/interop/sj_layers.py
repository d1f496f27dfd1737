"""SpikingJelly 2.0's stateless layers as plif's time-folded ones, holding the same tensors.

A SpikingJelly layer in multi-step mode runs its ``torch.nn`` parent once on ``[T*B, ...]``
(``functional.seq_to_ann_forward``): exactly :class:`plif.layers.TimeFolded` of that parent.  Each
plain module is built on the meta device and then given the SpikingJelly module's own parameter and
buffer objects (BatchNorm's running statistics and ``num_batches_tracked`` included), so nothing is
re-initialised and nothing is rounded.
"""
from __future__ import annotations

from torch import nn

from ..layers import MaxPool2d, TimeFolded, TimeInvariantDropout, Voting

__all__ = ["plain_layer", "fold", "convert_layer", "FOLDABLE"]


def _same_tensors(new: nn.Module, old: nn.Module) -> nn.Module:
    for name, p in old._parameters.items():
        new._parameters[name] = p
    for name, b in old._buffers.items():
        new._buffers[name] = b
    new.train(old.training)
    return new


def _conv(m):
    return nn.Conv2d(m.in_channels, m.out_channels, m.kernel_size, m.stride, m.padding, m.dilation, m.groups,
                     m.bias is not None, m.padding_mode, device="meta")


def _conv1d(m):
    return nn.Conv1d(m.in_channels, m.out_channels, m.kernel_size, m.stride, m.padding, m.dilation, m.groups,
                     m.bias is not None, m.padding_mode, device="meta")


def _bn(m):
    return nn.BatchNorm2d(m.num_features, m.eps, m.momentum, m.affine, m.track_running_stats, device="meta")


def _bn1d(m):
    return nn.BatchNorm1d(m.num_features, m.eps, m.momentum, m.affine, m.track_running_stats, device="meta")


def _linear(m):
    return nn.Linear(m.in_features, m.out_features, m.bias is not None, device="meta")


def _max_pool(m):
    return MaxPool2d(m.kernel_size, m.stride, m.padding, m.dilation, m.return_indices, m.ceil_mode)


def _avg_pool(m):
    return nn.AvgPool2d(m.kernel_size, m.stride, m.padding, m.ceil_mode, m.count_include_pad, m.divisor_override)


# the torch.nn parent of each SpikingJelly wrapper (and of itself, inside a SeqToANNContainer)
_PLAIN = {"Conv2d": _conv, "Conv1d": _conv1d, "BatchNorm2d": _bn, "BatchNorm1d": _bn1d, "Linear": _linear,
          "MaxPool2d": _max_pool, "AvgPool2d": _avg_pool,
          "AdaptiveAvgPool2d": lambda m: nn.AdaptiveAvgPool2d(m.output_size),
          "Flatten": lambda m: nn.Flatten(m.start_dim, m.end_dim), "Identity": lambda m: nn.Identity()}
FOLDABLE = tuple(_PLAIN)
"""The layer class names (SpikingJelly's, or torch.nn's inside a ``SeqToANNContainer``) converted exactly."""


def _is_sj(m) -> bool:
    """``m`` is exactly the SpikingJelly layer of its name (a subclass, e.g. ``WSConv2d``, is not)."""
    from spikingjelly.activation_based import layer

    return type(m) is getattr(layer, type(m).__name__, None)


def _is_torch(m) -> bool:
    return type(m) is getattr(nn, type(m).__name__, None)


def plain_layer(m, path: str, refuse) -> nn.Module:
    """The ``torch.nn`` layer (plif's ``MaxPool2d`` for max-pooling) computing ``m`` on one ``[N, ...]``
    batch, holding ``m``'s tensors; ``m`` is a SpikingJelly wrapper or a plain ``torch.nn`` layer."""
    name = type(m).__name__
    if name not in _PLAIN or not (_is_sj(m) or _is_torch(m)):
        refuse(path, name, "has no plif counterpart")
    if name == "MaxPool2d" and m.return_indices:
        refuse(path, "return_indices", "True has no plif counterpart")
    return _same_tensors(_PLAIN[name](m), m)


def fold(m, path: str, refuse) -> TimeFolded:
    """``TimeFolded(plain_layer(m))``, keeping ``step_mode = 'm'`` readable for forwards that ask it."""
    folded = TimeFolded(plain_layer(m, path, refuse))
    folded.step_mode = "m"  # SEWResNet's forward reads self.avgpool.step_mode
    return folded


def convert_layer(m, path: str, refuse):
    """plif's counterpart of a SpikingJelly stateless layer ``m``, or ``None`` when ``m`` is none of them."""
    name = type(m).__name__
    if not _is_sj(m):
        return None
    if name in _PLAIN:
        return fold(m, path, refuse)
    if name == "Dropout":  # mask drawn once per sample, scaled by 1/(1-p), reused at every step: the same
        out = TimeInvariantDropout(m.p)
    elif name == "VotingLayer":  # avg_pool1d(k=s=voting_size) over the last dim: plif's Voting
        out = Voting(m.voting_size)
    elif name == "SeqToANNContainer":  # one [T*B, ...] pass through its layers = each layer time-folded
        out = nn.Sequential()
        for key, child in m.named_children():
            out.add_module(key, TimeFolded(plain_layer(child, f"{path}.{key}", refuse)))
    else:
        return None
    out.train(m.training)
    out.step_mode = "m"
    return out
