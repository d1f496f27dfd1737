"""``plif.fuse`` and a max-pool of any shape (issue 53, item 1): after a conv → BN → neuron block, or
after a neuron alone, a pool with a non-square window or stride, padding, dilation or ``ceil_mode``
computes what ``nn.MaxPool2d`` as written computes (shape, spikes, gradients) in every memory mode,
and ``explain`` says how it runs."""
import copy

import pytest
import torch
from torch import nn

import plif
from plif.layers import MaxPool2d, TimeFolded
from plif.models import MEMORY_PRESETS

POOLS = {  # id: (class, args, kwargs)
    "2x2": (nn.MaxPool2d, (2,), {}),
    "2x3": (nn.MaxPool2d, ((2, 3),), {}),
    "3x2-s2x1": (MaxPool2d, ((3, 2), (2, 1)), {}),
    "2-s2x1": (nn.MaxPool2d, (2, (2, 1)), {}),
    "3-s2-pad1": (MaxPool2d, (3, 2, 1), {}),
    "2-dil2": (nn.MaxPool2d, (2, 2), {"dilation": 2}),
    "3-s2-ceil": (nn.MaxPool2d, (3, 2), {"ceil_mode": True}),
}


class _Net(nn.Module):
    """conv → BN → PLIF → pool (``bn``) or conv (with a bias) → PLIF → pool."""

    def __init__(self, pool: nn.Module, bn: bool):
        super().__init__()
        self.conv = TimeFolded(nn.Conv2d(2, 3, 3, padding=1, bias=not bn))
        self.bn = TimeFolded(nn.BatchNorm2d(3)) if bn else nn.Identity()
        self.sn = plif.PLIF(v_threshold=0.2)
        self.pool = TimeFolded(pool)

    def forward(self, x):
        return self.pool(self.sn(self.bn(self.conv(x))))


def _run(net, x):
    out = net(x)
    out.mul(torch.linspace(0.5, 1.5, out.numel()).view(out.shape)).sum().backward()
    return out.detach(), {n: p.grad.clone() for n, p in net.named_parameters()}


CASES = [(pool, True) for pool in POOLS] + [("2x3", False), ("2-s2x1", False)]


@pytest.mark.parametrize("memory", list(MEMORY_PRESETS))
@pytest.mark.parametrize("pool, bn", CASES, ids=[f"{p}-{'block' if b else 'neuron'}" for p, b in CASES])
def test_a_pool_of_any_shape_pools_as_written(pool, memory, bn):
    cls, args, kwargs = POOLS[pool]
    torch.manual_seed(0)
    written = _Net(cls(*args, **kwargs), bn)
    fused = plif.fuse(copy.deepcopy(written), memory)
    x = torch.rand(2, 2, 2, 7, 9, generator=torch.Generator().manual_seed(1))
    (o1, g1), (o0, g0) = _run(fused, x), _run(written, x)
    assert o1.shape == o0.shape and o0.sum() > 0
    assert torch.equal(o1, o0)
    tol = 2e-2 if MEMORY_PRESETS[memory].h_bf16 else 1e-4  # bf16 potentials kept for backward
    for n in g0:
        assert (g1[n] - g0[n]).abs().max() <= tol * g0[n].abs().max().clamp_min(1e-12), n


@pytest.mark.parametrize("pool, memory, expected", [
    ("2x3", "fused", "pool: a max-pool the fused block does not take: only 2×2 windows every 2 fuse (this one: 2×3 "
                     "windows every (2, 3))"),
    ("2x3", "fused", "runs after the block, as the spike pool"),
    ("2-s2x1", "exact", "(this one: 2×2 windows every (2, 1)); runs after the block, as the spike pool"),
    ("3-s2-pad1", "fused", "pool: a max-pool the fused block does not take: it pads (padding=1); runs after the "
                           "block, as written"),
    ("2-dil2", "spikes", "pool: runs as written, not as the spike pool: it dilates (dilation=2)"),
    ("3-s2-ceil", "low", "it rounds its output size up (ceil_mode=True); runs after the block, as written"),
])
def test_explain_says_how_the_pool_runs(pool, memory, expected):
    cls, args, kwargs = POOLS[pool]
    lines = plif.fuse(_Net(cls(*args, **kwargs), True), memory, explain=True)[1]
    assert any(expected in line for line in lines), lines


def test_only_the_2x2_pool_fuses_into_the_block():
    for pool, (cls, args, kwargs) in POOLS.items():
        net = plif.fuse(_Net(cls(*args, **kwargs), True))
        assert plif.fused_blocks(net) == [("conv", "bn", "sn", "pool") if pool == "2x2" else ("conv", "bn", "sn")]


def test_no_memory_mode_explains_a_conv_it_never_meant_to_fuse():
    assert plif.fuse(_Net(nn.MaxPool2d(2), True), "spikes", explain=True)[1] == []
