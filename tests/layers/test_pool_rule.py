"""The one rule for a max-pool (plif.layers.pool_rule): which path takes which pool, and why not."""
import pytest
from torch import nn

from plif.layers import MaxPool2d
from plif.layers.fused_block import fusable_pool
from plif.layers.pool_rule import max_pool_rule
from plif.layers.spike_pool import spike_poolable


@pytest.mark.parametrize("pool, spike, kernel, fused", [
    (nn.MaxPool2d(2), "", "", ""),
    (nn.MaxPool2d((2, 2), (2, 2)), "", "", ""),
    (nn.MaxPool2d(3, 2), "", "", "only 2×2 windows every 2 fuse (this one: 3×3 windows every 2)"),
    (nn.MaxPool2d((2, 3)), "", "not square", "2×3 windows every (2, 3)"),
    (nn.MaxPool2d(2, (2, 1)), "", "not square", "2×2 windows every (2, 1)"),
    (nn.MaxPool2d(3, 2, 1), "padding=1", "padding=1", "padding=1"),
    (nn.MaxPool2d(2, dilation=2), "dilation=2", "dilation=2", "dilation=2"),
    (nn.MaxPool2d(2, ceil_mode=True), "ceil_mode=True", "ceil_mode=True", "ceil_mode=True"),
    (nn.MaxPool2d(2, return_indices=True), "return_indices", "return_indices", "return_indices"),
    (nn.AvgPool2d(2), "AvgPool2d", "AvgPool2d", "AvgPool2d"),
])
def test_each_path_takes_what_it_can_run_and_says_why_not(pool, spike, kernel, fused):
    rule = max_pool_rule(pool)
    for got, want in ((rule.spike, spike), (rule.kernel, kernel), (rule.fused, fused)):
        assert (got == "") if want == "" else (want in got and "\n" not in got), (got, want)
    assert spike_poolable(pool) == (spike == "") if isinstance(pool, nn.MaxPool2d) else True
    assert fusable_pool(pool) == (fused == "")


def test_the_cpu_kernel_layer_asks_the_same_rule():
    assert MaxPool2d(2)._ks == (2, 2) and MaxPool2d(3, 1)._ks == (3, 1)
    assert MaxPool2d((2, 3))._ks is None and MaxPool2d(2, (2, 1))._ks is None and MaxPool2d(3, 2, 1)._ks is None
