import torch

from plif.train.optim import adam, fused_adam_supported, graph_adam


def test_adam_falls_back_where_fused_is_missing():
    assert not fused_adam_supported("cpu", "2.3.1+cpu") and fused_adam_supported("cpu", "2.4.0")
    assert fused_adam_supported("cuda", "2.1.0")


def test_the_graph_adam_keeps_its_learning_rate_in_a_tensor_and_steps_as_adam_does():
    a, b = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    b.load_state_dict(a.state_dict())
    opt_a, opt_b = adam(a.parameters(), 1e-2), graph_adam(b.parameters(), 1e-2, torch.device("cpu"))
    assert torch.is_tensor(opt_b.param_groups[0]["lr"]) and not torch.is_tensor(opt_a.param_groups[0]["lr"])
    x = torch.randn(4, 3)
    for net, opt in ((a, opt_a), (b, opt_b)):
        net(x).square().sum().backward()
        opt.step()
    assert all(torch.allclose(p, q) for p, q in zip(a.parameters(), b.parameters()))
