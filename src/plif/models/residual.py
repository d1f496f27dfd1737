"""plif's residual zoo: SEW ResNet, Spiking ResNet and the SEW paper's event networks, written with
plif's layers (no SpikingJelly import), fused by ``plif.fuse`` by default.

Every network maps ``[T, B, C, H, W]`` to ``[T, B, num_classes]`` and is built by a factory
``factory(input_shape, num_classes, T=None, *, neuron="PLIF", tau0=2.0, width=..., fused=True)``
(:data:`RESIDUAL_ZOO`, the names ``plif zoo`` lists and ``plif train --model NAME`` trains).

Sources, the structure of each entry:

- ``sew-resnet18/34`` (connect ADD; ``-and``, ``-iand``): Fang et al., "Deep Residual Learning in Spiking
  Neural Networks", NeurIPS 2021, Fig. 1 / Eq. 4; as SpikingJelly 2.0's
  ``activation_based.model.sew_resnet`` (torchvision's ResNet with a neuron after every BN and after the
  downsample's BN; ``out = g(identity, block(x))``, ADD ``a + s``, AND ``a s``, IAND ``a (1 - s)``);
- ``spiking-resnet18/34``: the same paper's "Spiking ResNet" baseline, as SpikingJelly 2.0's
  ``model.spiking_resnet`` (the neuron after the addition: ``sn2(bn2(conv2(.)) + identity)``);
  both with torchvision's ImageNet stem (7x7/2 conv, 3x3/2 max-pool), or for 32x32 inputs the CIFAR
  stem (3x3/1 conv, no max-pool), as in SEW ResNet's CIFAR experiments and the common CIFAR ResNets;
  the same module names as SpikingJelly's, so a converted SpikingJelly model
  (:func:`plif.from_spikingjelly`) and the zoo's hold the same ``state_dict`` keys;
- ``sew-7b-net`` (DVS128 Gesture) and ``sew-wide-7b-net`` (CIFAR10-DVS): the SEW paper's Table 4
  networks, as the public repository fangwei123456/Spike-Element-Wise-ResNet defines them
  (``dvsgesture/smodels.py`` and ``cifar10dvs/smodels.py``, ``SEWResNet(connect_f)``): seven stages of
  [1x1 conv-BN-PLIF where the channels change] - SEW block (two 3x3 conv-BN-PLIF, then the connect
  function with the stage's input) - 2x2 max-pool, 32 channels throughout (7B-Net) or 64 for four stages
  then 128 for three (Wide-7B-Net); then flatten and one linear layer with bias.  The repository
  applies that layer to the mean over T; here it runs at every step (``[T, B, classes]``), and its mean
  over T, what plif's loss reads, is the same (the layer is affine).
"""
from __future__ import annotations


import torch
from torch import nn

from ..layers import MaxPool2d, TimeFolded
from ..neurons import make_neuron

__all__ = ["CONNECT", "SEWBasicBlock", "SpikingBasicBlock", "ResNet", "SEWEventNet", "RESIDUAL_ZOO",
           "sew_resnet18", "sew_resnet34", "sew_resnet18_and", "sew_resnet18_iand", "sew_resnet34_and",
           "sew_resnet34_iand", "spiking_resnet18", "spiking_resnet34", "sew_7b_net", "sew_wide_7b_net"]

CONNECT = {"ADD": lambda a, s: a + s, "AND": lambda a, s: a * s, "IAND": lambda a, s: a * (1.0 - s)}
"""SEW's element-wise connect functions ``g(identity a, block output s)``."""


def _connect(name: str) -> str:
    key = str(name).upper()
    if key not in CONNECT:
        raise ValueError(f"connect must be one of {', '.join(CONNECT)}, got {name!r}")
    return key


def conv(cin: int, cout: int, k: int, stride: int = 1) -> TimeFolded:
    """A time-folded ``k x k`` convolution without bias, padded to keep the size at stride 1."""
    return TimeFolded(nn.Conv2d(cin, cout, k, stride, k // 2, bias=False))


def bn(c: int) -> TimeFolded:
    return TimeFolded(nn.BatchNorm2d(c))


class _Neurons:
    """Makes the network's neuron layers: ``neuron`` (IF, LIF, PLIF) with τ0 and its keywords."""

    def __init__(self, neuron: str = "PLIF", tau0: float = 2.0, **kwargs):
        make_neuron(neuron, tau=tau0, **kwargs)  # a bad name or τ0 fails here, before anything is built
        self.args = (neuron, tau0, kwargs)

    def __call__(self) -> nn.Module:
        neuron, tau0, kwargs = self.args
        return make_neuron(neuron, tau=tau0, **kwargs)


def _downsample(cin: int, cout: int, stride: int) -> nn.Sequential | None:
    if stride == 1 and cin == cout:
        return None
    return nn.Sequential(conv(cin, cout, 1, stride), bn(cout))


class SEWBasicBlock(nn.Module):
    """SEW ResNet's basic block: ``g(identity, sn2(bn2(conv2(sn1(bn1(conv1(x)))))))``; the identity is
    ``downsample_sn(downsample(x))`` where the shape changes (names as SpikingJelly's)."""

    def __init__(self, cin: int, cout: int, stride: int, neurons: _Neurons, connect: str = "ADD"):
        super().__init__()
        self.conv1, self.bn1, self.sn1 = conv(cin, cout, 3, stride), bn(cout), neurons()
        self.conv2, self.bn2, self.sn2 = conv(cout, cout, 3), bn(cout), neurons()
        self.downsample = _downsample(cin, cout, stride)
        if self.downsample is not None:
            self.downsample_sn = neurons()
        self.cnf = _connect(connect)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.sn2(self.bn2(self.conv2(self.sn1(self.bn1(self.conv1(x))))))
        identity = x if self.downsample is None else self.downsample_sn(self.downsample(x))
        return CONNECT[self.cnf](identity, out)

    def extra_repr(self) -> str:
        return f"connect={self.cnf}"


class SpikingBasicBlock(nn.Module):
    """Spiking ResNet's basic block: ``sn2(bn2(conv2(sn1(bn1(conv1(x))))) + identity)``."""

    def __init__(self, cin: int, cout: int, stride: int, neurons: _Neurons, connect=None):
        super().__init__()
        self.conv1, self.bn1, self.sn1 = conv(cin, cout, 3, stride), bn(cout), neurons()
        self.conv2, self.bn2 = conv(cout, cout, 3), bn(cout)
        self.downsample = _downsample(cin, cout, stride)
        self.sn2 = neurons()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(self.sn1(self.bn1(self.conv1(x)))))
        identity = x if self.downsample is None else self.downsample(x)
        return self.sn2(out + identity)


class ResNet(nn.Module):
    """A spiking ResNet over ``[T, B, C, H, W]``: stem, four stages of ``blocks[i]`` blocks with
    ``width * 2^i`` channels (stride 2 from the second), global average pooling, a linear layer with bias.

    stem: ``"imagenet"`` (7x7/2 conv, 3x3/2 max-pool) or ``"cifar"`` (3x3/1 conv, no pooling)."""

    def __init__(self, block: type, blocks: tuple, in_channels: int, num_classes: int, neurons: _Neurons,
                 stem: str = "imagenet", width: int = 64, connect: str = "ADD"):
        super().__init__()
        if stem not in ("imagenet", "cifar"):
            raise ValueError(f"stem must be 'imagenet' or 'cifar', got {stem!r}")
        self.conv1 = conv(in_channels, width, 7, 2) if stem == "imagenet" else conv(in_channels, width, 3)
        self.bn1, self.sn1 = bn(width), neurons()
        self.maxpool = TimeFolded(MaxPool2d(3, 2, 1)) if stem == "imagenet" else nn.Identity()
        cin = width
        for i, n in enumerate(blocks):
            cout = width * 2**i
            stage = [block(cin if j == 0 else cout, cout, 2 if i and j == 0 else 1, neurons, connect) for j in range(n)]
            self.add_module(f"layer{i + 1}", nn.Sequential(*stage))
            cin = cout
        self.avgpool = TimeFolded(nn.AdaptiveAvgPool2d(1))
        self.fc = TimeFolded(nn.Linear(cin, num_classes))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):  # SpikingJelly's and torchvision's initialisation
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.sn1(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.avgpool(x).flatten(2))


class SEWEventNet(nn.Module):
    """The SEW paper's event networks (7B-Net, Wide-7B-Net; see the module docstring for the source):
    ``stages`` channel counts, each stage ``[1x1 conv-BN-neuron if the channels change] - SEW block -
    2x2 max-pool``, then flatten and a linear layer with bias at every time-step."""

    def __init__(self, stages: tuple, in_channels: int, num_classes: int, hw: tuple, neurons: _Neurons,
                 connect: str = "ADD"):
        super().__init__()
        layers, cin = [], in_channels
        for c in stages:
            if cin != c:
                layers.append(nn.Sequential(conv(cin, c, 1), bn(c), neurons()))
            layers += [SEWBlock(c, c, neurons, connect), TimeFolded(MaxPool2d(2, 2))]
            cin = c
        self.conv = nn.Sequential(*layers)
        h, w = hw[0] >> len(stages), hw[1] >> len(stages)
        if h < 1 or w < 1:
            raise ValueError(f"{len(stages)} 2x2 max-pools need an input of at least {2 ** len(stages)} pixels "
                             f"each side, got {hw[0]}x{hw[1]}")
        self.out = TimeFolded(nn.Linear(cin * h * w, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.conv(x).flatten(2))


class SEWBlock(nn.Module):
    """The repository's ``SEWBlock``: ``g(x, conv(x))`` with ``conv`` two 3x3 conv-BN-neuron."""

    def __init__(self, channels: int, mid: int, neurons: _Neurons, connect: str = "ADD"):
        super().__init__()
        self.conv = nn.Sequential(conv(channels, mid, 3), bn(mid), neurons(), conv(mid, channels, 3), bn(channels),
                                  neurons())
        self.cnf = _connect(connect)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return CONNECT[self.cnf](x, self.conv(x))

    def extra_repr(self) -> str:
        return f"connect={self.cnf}"


def _shape(input_shape) -> tuple:
    shape = tuple(int(v) for v in input_shape)
    if len(shape) != 3 or min(shape) < 1:
        raise ValueError(f"the residual zoo takes images: input_shape (C, H, W), got {input_shape!r}")
    return shape


def _finish(net: nn.Module, fused: bool, memory: str) -> nn.Module:
    if not fused:
        return net
    from .fusion import fuse

    return fuse(net, memory=memory)


def _resnet(block, blocks, input_shape, num_classes, stem, width, connect, fused, memory, **neuron):
    c, h, w = _shape(input_shape)
    stem = stem or ("cifar" if (h, w) == (32, 32) else "imagenet")
    net = ResNet(block, blocks, c, int(num_classes), _Neurons(**neuron), stem, int(width), connect)
    return _finish(net, fused, memory)


def sew_resnet18(input_shape=(3, 32, 32), num_classes: int = 10, T: int | None = None, *, connect: str = "ADD",
                 stem: str | None = None, width: int = 64, fused: bool = True, memory: str = "fused", **neuron):
    """SEW ResNet-18 (``connect`` ADD, AND or IAND); ``stem`` None: CIFAR for 32x32 inputs, else ImageNet;
    ``neuron``: ``neuron="PLIF"``, ``tau0=2.0`` and the neuron layer's keywords."""
    return _resnet(SEWBasicBlock, (2, 2, 2, 2), input_shape, num_classes, stem, width, connect, fused, memory, **neuron)


def sew_resnet34(input_shape=(3, 32, 32), num_classes: int = 10, T: int | None = None, *, connect: str = "ADD",
                 stem: str | None = None, width: int = 64, fused: bool = True, memory: str = "fused", **neuron):
    """SEW ResNet-34; the options as :func:`sew_resnet18`'s."""
    return _resnet(SEWBasicBlock, (3, 4, 6, 3), input_shape, num_classes, stem, width, connect, fused, memory, **neuron)


def spiking_resnet18(input_shape=(3, 32, 32), num_classes: int = 10, T: int | None = None, *,
                     stem: str | None = None, width: int = 64, fused: bool = True, memory: str = "fused", **neuron):
    """Spiking ResNet-18 (the neuron after the addition); the options as :func:`sew_resnet18`'s."""
    return _resnet(SpikingBasicBlock, (2, 2, 2, 2), input_shape, num_classes, stem, width, None, fused, memory,
                   **neuron)


def spiking_resnet34(input_shape=(3, 32, 32), num_classes: int = 10, T: int | None = None, *,
                     stem: str | None = None, width: int = 64, fused: bool = True, memory: str = "fused", **neuron):
    """Spiking ResNet-34; the options as :func:`sew_resnet18`'s."""
    return _resnet(SpikingBasicBlock, (3, 4, 6, 3), input_shape, num_classes, stem, width, None, fused, memory,
                   **neuron)


def _event(stages, input_shape, num_classes, connect, fused, memory, **neuron):
    c, h, w = _shape(input_shape)
    return _finish(SEWEventNet(stages, c, int(num_classes), (h, w), _Neurons(**neuron), connect), fused, memory)


def sew_7b_net(input_shape=(2, 128, 128), num_classes: int = 11, T: int | None = None, *, connect: str = "ADD",
               width: int = 32, fused: bool = True, memory: str = "fused", **neuron):
    """The SEW paper's DVS128 Gesture network (7B-Net): seven SEW stages of ``width`` (32) channels."""
    return _event((int(width),) * 7, input_shape, num_classes, connect, fused, memory, **neuron)


def sew_wide_7b_net(input_shape=(2, 128, 128), num_classes: int = 10, T: int | None = None, *,
                    connect: str = "ADD", width: int = 64, fused: bool = True, memory: str = "fused", **neuron):
    """The SEW paper's CIFAR10-DVS network (Wide-7B-Net): four stages of ``width`` (64) channels, three of
    twice that."""
    w = int(width)
    return _event((w,) * 4 + (2 * w,) * 3, input_shape, num_classes, connect, fused, memory, **neuron)


def _with(factory, **fixed):
    def build(input_shape, num_classes, T=None, **kwargs):
        return factory(input_shape, num_classes, T, **fixed, **kwargs)

    build.__doc__ = f"{factory.__name__} with {fixed}: " + (factory.__doc__ or "")
    build.__name__ = factory.__name__ + "".join(f"_{str(v).lower()}" for v in fixed.values())
    return build


sew_resnet18_and, sew_resnet18_iand = _with(sew_resnet18, connect="AND"), _with(sew_resnet18, connect="IAND")
sew_resnet34_and, sew_resnet34_iand = _with(sew_resnet34, connect="AND"), _with(sew_resnet34, connect="IAND")

# name -> (factory, the dataset whose shape and classes it is listed with); the factory's name is the
# entry's with "_" for "-" (plif.models.factories names them so, importing this module only when asked)
RESIDUAL_ZOO = {
    "sew-resnet18": (sew_resnet18, "cifar10"),
    "sew-resnet18-and": (sew_resnet18_and, "cifar10"),
    "sew-resnet18-iand": (sew_resnet18_iand, "cifar10"),
    "sew-resnet34": (sew_resnet34, "cifar10"),
    "sew-resnet34-and": (sew_resnet34_and, "cifar10"),
    "sew-resnet34-iand": (sew_resnet34_iand, "cifar10"),
    "spiking-resnet18": (spiking_resnet18, "cifar10"),
    "spiking-resnet34": (spiking_resnet34, "cifar10"),
    "sew-7b-net": (sew_7b_net, "dvs128-gesture"),
    "sew-wide-7b-net": (sew_wide_7b_net, "cifar10-dvs"),
}
"""The residual zoo by name: ``(factory(input_shape, num_classes, T=None, **options), listed dataset)``."""


def parameter_count(net: nn.Module) -> int:
    """The number of parameters (weights, BN affine, τ's ``w``)."""
    return sum(p.numel() for p in net.parameters())


