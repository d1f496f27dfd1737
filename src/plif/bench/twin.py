"""The SpikingJelly twin of a plif network: every benchmark compares against the same network.

``spikingjelly_twin(net)`` rebuilds a :class:`~plif.models.SpikingNetwork` layer by layer from
SpikingJelly 2.0 multi-step layers (same layer kinds, shapes, neuron type, initial tau, threshold,
reset and surrogate; its own initial weights) and returns it with SpikingJelly's ``reset_net``.
SpikingJelly 2.0 chooses its neuron implementation itself, per call, from the input's device
(:func:`plif.bench.spikingjelly.spikingjelly_path` names the one it binds), so the twin is the same
for every device.
The plif network takes static input ``[B, C, H, W]`` or frames ``[T, B, C, H, W]``; the twin
always takes ``[T, B, ...]`` (repeat a static input T times).  SpikingJelly is never a dependency
of plif: the import fails with ``ImportError`` when it is not installed.
"""
from __future__ import annotations

__all__ = ["spikingjelly_twin"]


def _neuron(m):
    from spikingjelly.activation_based import neuron, surrogate

    from ..neurons import IF, LIF, PLIF

    c = m.cfg
    if c.surrogate != "atan":
        raise ValueError(f"the SpikingJelly twin has the atan surrogate only, not {c.surrogate!r}")
    common = dict(v_threshold=c.v_threshold, v_reset=c.v_reset, detach_reset=c.detach_reset,
                  surrogate_function=surrogate.ATan(**({} if c.alpha is None else {"alpha": c.alpha})), step_mode="m")
    if isinstance(m, PLIF):
        if m.w.dim() != 0:
            raise ValueError("the SpikingJelly twin has one tau per layer, not per channel")
        n = neuron.ParametricLIFNode(init_tau=float(m.tau), decay_input=True, **common)
    elif isinstance(m, LIF):
        n = neuron.LIFNode(tau=m.tau, decay_input=True, **common)
    elif isinstance(m, IF):
        n = neuron.IFNode(**common)
    else:
        raise ValueError(f"no SpikingJelly neuron for {type(m).__name__}")
    # SpikingJelly 2.0 has no backend argument: each call picks its implementation from the tensor's
    # device (CUDA eager: native CUDA if built, else Triton, else torch); spikingjelly_path() says which
    return n


def spikingjelly_twin(net, device: str = "cpu"):
    """``(twin, reset_net)``: ``net`` rebuilt from SpikingJelly layers, to run on ``device`` (built on
    the CPU; the caller moves it).  SpikingJelly runs on the CPU and NVIDIA CUDA only: another device
    type is refused here rather than in the first step."""
    import torch
    from spikingjelly.activation_based import functional, layer
    from torch import nn

    from ..layers import PerStepBatchNorm, TimeInvariantDropout, Voting, unwrap
    from ..neurons import SpikingNeuron

    if torch.device(device).type not in ("cpu", "cuda"):
        raise ValueError(f"the SpikingJelly twin runs on cpu or cuda, not {device!r}")
    out = []
    for m, info in zip(net.layers, net.info):
        if isinstance(m, PerStepBatchNorm):  # SpikingJelly normalises over T*B only
            raise ValueError(f"no SpikingJelly layer for {info.token} per time-step")
        m = unwrap(m)
        if isinstance(m, nn.Conv2d):
            sj = layer.Conv2d(m.in_channels, m.out_channels, m.kernel_size, m.stride,
                              m.padding, bias=m.bias is not None, step_mode="m")
        elif isinstance(m, nn.BatchNorm2d):
            sj = layer.BatchNorm2d(m.num_features, step_mode="m")
        elif isinstance(m, nn.BatchNorm1d):
            sj = layer.BatchNorm1d(m.num_features, step_mode="m")
        elif isinstance(m, SpikingNeuron):
            sj = _neuron(m)
        elif isinstance(m, nn.MaxPool2d):
            sj = layer.MaxPool2d(m.kernel_size, m.stride, step_mode="m")
        elif isinstance(m, nn.AvgPool2d):
            sj = layer.AvgPool2d(m.kernel_size, m.stride, step_mode="m")
        elif isinstance(m, TimeInvariantDropout):
            sj = layer.Dropout(m.p, step_mode="m")
        elif isinstance(m, nn.Flatten):
            sj = layer.Flatten(step_mode="m")
        elif isinstance(m, nn.Linear):
            sj = layer.Linear(m.in_features, m.out_features, bias=m.bias is not None, step_mode="m")
        elif isinstance(m, Voting):
            sj = layer.VotingLayer(m.group, step_mode="m")
        else:
            raise ValueError(f"no SpikingJelly layer for {info.token}")
        out.append(sj)
    return nn.Sequential(*out), functional.reset_net
