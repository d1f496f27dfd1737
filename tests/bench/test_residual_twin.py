"""The SpikingJelly twins the benchmarks time plif's residual zoo against compute the zoo networks'
function with their weights (float64, every connect function and both event networks' structure)."""
from __future__ import annotations

import pytest
import torch

from plif.models.residual import RESIDUAL_ZOO


@pytest.mark.parametrize("name,shape,width", [("sew-7b-net", (2, 128, 128), 4), ("sew-wide-7b-net", (2, 128, 128), 2),
                                              ("sew-resnet18-iand", (3, 8, 8), 64),
                                              ("spiking-resnet18", (3, 8, 8), 64)])
def test_twin_computes_the_zoo_network(name, shape, width):
    from sj_testing import sj

    sj()  # skips where SpikingJelly is unavailable
    from plif.bench.residual_twin import spikingjelly_residual_twin

    factory, _ = RESIDUAL_ZOO[name]
    torch.manual_seed(0)
    net = factory(shape, 10, width=width, **({"stem": "cifar"} if shape[0] == 3 else {})).double()
    twin, reset_net = spikingjelly_residual_twin(net)
    x = torch.rand(2, 1, *shape, dtype=torch.float64) * 3
    with torch.no_grad():
        want = net(x)
        got = twin.double()(x)
    assert want.abs().max() > 0
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12)
