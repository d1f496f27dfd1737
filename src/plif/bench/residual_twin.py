"""SpikingJelly 2.0 networks of the same structure as plif's residual zoo, holding the zoo network's
weights: what ``plif bench train --model NAME`` and the GPU script time SpikingJelly with.

- SEW / Spiking ResNet: SpikingJelly's own ``sew_resnet18/34`` (the entry's connect function) or
  ``spiking_resnet18/34``, ParametricLIFNode with ATan and detach_reset as plif's PLIF, with the CIFAR
  stem where the zoo network has it (3x3/1 first convolution, no max-pool);
- the SEW event networks (7B-Net, Wide-7B-Net): written with SpikingJelly's layers as
  Spike-Element-Wise-ResNet's ``smodels.py`` writes them (conv-BN-PLIF, SEW blocks, max-pools).
The zoo network's ``state_dict`` loads into the twin with the time wrappers' ``.layer`` removed from
its keys (the module names are the same by construction).
"""
from __future__ import annotations

import re

from torch import nn

__all__ = ["spikingjelly_residual_twin", "sj_key"]


def sj_key(name: str) -> str:
    """A plif parameter's or buffer's name in the SpikingJelly twin: the time wrappers' ``.layer`` removed."""
    return re.sub(r"\.layer(?=\.|$)", "", name)


class _SJEventNet(nn.Module):
    def __init__(self, conv: nn.Sequential, out: nn.Module):
        super().__init__()
        self.conv, self.out = conv, out

    def forward(self, x):
        return self.out(self.conv(x).flatten(2))


class _SJSEWBlock(nn.Module):
    def __init__(self, conv: nn.Sequential, cnf: str):
        super().__init__()
        self.conv, self.cnf = conv, cnf

    def forward(self, x):
        from ..models.residual import CONNECT

        return CONNECT[self.cnf](x, self.conv(x))


def _sn():
    from spikingjelly.activation_based import neuron, surrogate

    return neuron.ParametricLIFNode(init_tau=2.0, detach_reset=True, surrogate_function=surrogate.ATan())


def _sj_layer(m: nn.Module) -> nn.Module:
    """The SpikingJelly layer (or neuron) of one module of plif's event network."""
    from spikingjelly.activation_based import layer

    from ..layers import unwrap
    from ..neurons import SpikingNeuron

    if isinstance(m, SpikingNeuron):
        return _sn()
    inner = unwrap(m)
    if isinstance(inner, nn.Conv2d):
        return layer.Conv2d(inner.in_channels, inner.out_channels, inner.kernel_size, inner.stride, inner.padding,
                            bias=False)
    if isinstance(inner, nn.BatchNorm2d):
        return layer.BatchNorm2d(inner.num_features)
    if isinstance(inner, nn.MaxPool2d):
        return layer.MaxPool2d(inner.kernel_size, inner.stride)
    if isinstance(inner, nn.Linear):
        return layer.Linear(inner.in_features, inner.out_features, bias=inner.bias is not None)
    raise TypeError(f"no SpikingJelly twin for {type(inner).__name__}")


def _event_twin(net) -> nn.Module:
    from ..models.residual import SEWBlock

    stages = []
    for m in net.conv:
        if isinstance(m, SEWBlock):
            stages.append(_SJSEWBlock(nn.Sequential(*[_sj_layer(c) for c in m.conv]), m.cnf))
        elif isinstance(m, nn.Sequential):
            stages.append(nn.Sequential(*[_sj_layer(c) for c in m]))
        else:
            stages.append(_sj_layer(m))
    return _SJEventNet(nn.Sequential(*stages), _sj_layer(net.out))


def _resnet_twin(net) -> nn.Module:
    from spikingjelly.activation_based import layer, neuron, surrogate

    from ..models.residual import SEWBasicBlock
    from .spikingjelly import spikingjelly_model

    depth = 18 if [len(getattr(net, f"layer{i}")) for i in range(1, 5)] == [2, 2, 2, 2] else 34
    block = net.layer1[0]
    kw = dict(num_classes=net.fc.layer.out_features, spiking_neuron=neuron.ParametricLIFNode,
              surrogate_function=surrogate.ATan(), detach_reset=True)
    if isinstance(block, SEWBasicBlock):
        sj = getattr(spikingjelly_model("sew_resnet"), f"sew_resnet{depth}")(cnf=block.cnf, **kw)
    else:
        sj = getattr(spikingjelly_model("spiking_resnet"), f"spiking_resnet{depth}")(**kw)
    conv1 = net.conv1.layer
    if conv1.in_channels != 3 or conv1.kernel_size != (7, 7):
        sj.conv1 = layer.Conv2d(conv1.in_channels, conv1.out_channels, conv1.kernel_size, conv1.stride,
                                conv1.padding, bias=False)
    if isinstance(net.maxpool, nn.Identity):
        sj.maxpool = nn.Identity()
    return sj


def spikingjelly_residual_twin(net: nn.Module):
    """``(SpikingJelly network, functional.reset_net)``: the twin of zoo network ``net`` (plif's
    :class:`~plif.models.residual.ResNet` or :class:`~plif.models.residual.SEWEventNet`, 64 channels wide
    for a ResNet, as SpikingJelly's), multi-step, holding ``net``'s weights."""
    from spikingjelly.activation_based import functional

    from ..models.residual import ResNet, SEWEventNet

    if isinstance(net, ResNet):
        sj = _resnet_twin(net)
    elif isinstance(net, SEWEventNet):
        sj = _event_twin(net)
    else:
        raise TypeError(f"no SpikingJelly twin for {type(net).__name__}")
    functional.set_step_mode(sj, "m")
    sj.load_state_dict({sj_key(k): v for k, v in net.state_dict().items()})
    return sj, functional.reset_net
