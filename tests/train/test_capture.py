"""A training step must be one compile region: no graph breaks, no host syncs in the network."""
import pytest
import torch

from plif.models import build_zoo
from plif.train.loss import rate_mse_loss


@pytest.mark.parametrize("backend", ["bptt", "reference"])
def test_forward_and_loss_trace_as_one_graph(backend):
    net = build_zoo("fashion-mnist", T=2, backend=backend)
    x, y = torch.randn(4, 1, 28, 28), torch.tensor([0, 3, 7, 9])

    def loss_fn(x, y):
        return rate_mse_loss(net(x), y, 10)[0]

    compiled = torch.compile(loss_fn, fullgraph=True, backend="eager")  # raises on any graph break
    torch.manual_seed(1)
    loss_c = compiled(x, y)
    loss_c.backward()
    grads_c = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    torch.manual_seed(1)
    loss_e = loss_fn(x, y)
    loss_e.backward()
    assert torch.equal(loss_c.detach(), loss_e.detach())
    for a, p in zip(grads_c, net.parameters()):
        assert torch.allclose(a, p.grad, atol=1e-6)
