"""Networks written by hand from plif's layers, as docs/usage.md shows them: the paper's Fashion-MNIST
network as an ``nn.Sequential`` and a residual network with its own ``forward`` (``plif.fuse``'s
benchmarks, benchmarks/bench_fuse.py and the GPU script, and its tests, tests/models/test_fuse.py)."""
from torch import nn

from plif.layers import TimeFolded, TimeInvariantDropout, Voting
from plif.neurons import PLIF


def conv_bn(cin: int, cout: int, k: int = 3, stride: int = 1) -> list[nn.Module]:
    return [TimeFolded(nn.Conv2d(cin, cout, k, stride, k // 2, bias=False)), TimeFolded(nn.BatchNorm2d(cout))]


def paper_net(c: int = 128, hidden: int = 2048, classes: int = 10, size: int = 28, **neuron) -> nn.Sequential:
    """``{c128k3s1-BN-PLIF-MPk2s2}*2-DP-FC2048-PLIF-DP-FC100-PLIF-APk10s10`` written by hand."""
    pool = lambda: TimeFolded(nn.MaxPool2d(2, 2))  # noqa: E731
    return nn.Sequential(
        *conv_bn(1, c), PLIF(**neuron), pool(), *conv_bn(c, c), PLIF(**neuron), pool(),
        TimeInvariantDropout(0.5), TimeFolded(nn.Flatten()), TimeFolded(nn.Linear(c * (size // 4) ** 2, hidden, bias=False)),
        PLIF(**neuron), TimeInvariantDropout(0.5), TimeFolded(nn.Linear(hidden, classes * 10, bias=False)),
        PLIF(**neuron), Voting(10))


class Block(nn.Module):
    """SEW ResNet's basic block (Fang et al., 2021, ADD): two conv → BN → PLIF, and where the shape
    changes a downsampling shortcut strided 1×1 conv → BN → PLIF (as SpikingJelly's ``sew_resnet``
    builds it), added to the block's spikes."""

    def __init__(self, cin: int, cout: int, stride: int = 1, **neuron):
        super().__init__()
        self.conv1, self.bn1 = conv_bn(cin, cout, 3, stride)
        self.sn1 = PLIF(**neuron)
        self.conv2, self.bn2 = conv_bn(cout, cout)
        self.sn2 = PLIF(**neuron)
        self.shortcut = (nn.Sequential(*conv_bn(cin, cout, 1, stride), PLIF(**neuron)) if stride != 1 or cin != cout
                         else nn.Identity())

    def forward(self, x):
        out = self.sn1(self.bn1(self.conv1(x)))
        out = self.sn2(self.bn2(self.conv2(out)))
        return out + self.shortcut(x)


class ResNet(nn.Module):
    """A stem, two residual blocks that halve the resolution, average pooling and a voting output."""

    def __init__(self, c: int = 32, classes: int = 10, size: int = 32, in_channels: int = 3, **neuron):
        super().__init__()
        self.conv1, self.bn1 = conv_bn(in_channels, c)
        self.sn1 = PLIF(**neuron)
        self.layer1 = nn.Sequential(Block(c, 2 * c, 2, **neuron))
        self.layer2 = nn.Sequential(Block(2 * c, 4 * c, 2, **neuron))
        self.pool = TimeFolded(nn.AdaptiveAvgPool2d(1))
        self.flat = TimeFolded(nn.Flatten())
        self.fc = TimeFolded(nn.Linear(4 * c, classes * 10, bias=False))
        self.sn_out = PLIF(**neuron)
        self.vote = Voting(10)

    def forward(self, x):
        x = self.sn1(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        return self.vote(self.sn_out(self.fc(self.flat(self.pool(x)))))


class StaticInput(nn.Module):
    """``net`` fed an image ``[B, ...]`` at each of ``T`` steps as a stride-0 view (what a captured
    step's input buffer holds is then the image, not its repeat)."""

    def __init__(self, net: nn.Module, T: int):
        super().__init__()
        self.net, self.T = net, int(T)

    def forward(self, x):
        return self.net(x.unsqueeze(0).expand(self.T, *([-1] * x.dim())))
