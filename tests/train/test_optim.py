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


# --- --optimizer, --weight-decay, --warmup-epochs (issue 56) -------------------------------------------

import math  # noqa: E402

import pytest  # noqa: E402

from plif.train.optim import (Recipe, WarmupCosineLR, build_optimizer, build_schedule, sgd,  # noqa: E402
                              warmup_cosine_factor)


def test_warm_up_rises_linearly_then_the_cosine_anneals_over_the_rest_of_the_period():
    # warm-up 2 of period 6: 1/3, 2/3, then cos over the 4 epochs left
    want = [1 / 3, 2 / 3] + [(1 + math.cos(math.pi * k / 4)) / 2 for k in range(4)]
    assert [warmup_cosine_factor(e, 2, 6) for e in range(6)] == pytest.approx(want, rel=1e-15)
    assert [warmup_cosine_factor(e, 0, 4) for e in range(4)] == pytest.approx(
        [(1 + math.cos(math.pi * e / 4)) / 2 for e in range(4)], rel=1e-15)  # no warm-up: torch's cosine


@pytest.mark.parametrize("tensor_lr", [False, True])
def test_the_warm_up_schedule_sets_each_epochs_rate_and_resumes_from_its_state(tensor_lr):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=torch.tensor(0.1) if tensor_lr else 0.1, momentum=0.9)
    sched = WarmupCosineLR(opt, 1, 3)
    seen = []
    for _ in range(3):
        seen.append(float(opt.param_groups[0]["lr"]))
        opt.step()
        sched.step()
    assert seen == pytest.approx([0.05, 0.1, 0.05], rel=1e-6)  # 1/2, then cos 0 and cos pi/2 over 2 epochs
    assert torch.is_tensor(opt.param_groups[0]["lr"]) == tensor_lr  # the captured step's tensor, filled in place
    again = WarmupCosineLR(torch.optim.SGD([p], lr=0.1, momentum=0.9), 1, 3)
    again.load_state_dict(sched.state_dict())
    assert (again.warmup, again.T_max, again.last_epoch) == (1, 3, 3)
    with pytest.raises(ValueError, match="--warmup-epochs 3: must be at least 1 and below the cosine period 3"):
        WarmupCosineLR(opt, 3, 3)


def test_the_default_recipe_builds_the_papers_adam_and_torchs_cosine():
    net = torch.nn.Linear(3, 2)
    opt = build_optimizer(net.parameters(), Recipe(lr=2e-3, t_max=2), torch.device("cpu"))
    ref = adam(torch.nn.Linear(3, 2).parameters(), 2e-3)
    assert type(opt) is torch.optim.Adam and opt.defaults == ref.defaults
    assert type(build_schedule(opt, Recipe(t_max=2))) is torch.optim.lr_scheduler.CosineAnnealingLR
    assert type(build_schedule(opt, Recipe(t_max=2, warmup_epochs=1))) is WarmupCosineLR
    graph = build_optimizer(net.parameters(), Recipe(lr=2e-3), torch.device("cpu"), graph=True)
    assert torch.is_tensor(graph.param_groups[0]["lr"])


def test_sgd_steps_as_torchs_sgd_with_momentum_nesterov_and_weight_decay():
    a, b = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    b.load_state_dict(a.state_dict())
    recipe = Recipe("sgd", lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2)
    opt_a = build_optimizer(a.parameters(), recipe, torch.device("cpu"))
    opt_b = torch.optim.SGD(b.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2, foreach=False)
    assert opt_a.defaults["fused"] and opt_a.defaults["nesterov"]
    x = torch.randn(4, 3)
    for _ in range(3):
        for net, opt in ((a, opt_a), (b, opt_b)):
            opt.zero_grad()
            net(x).square().sum().backward()
            opt.step()
    assert all(torch.allclose(p, q, rtol=1e-6, atol=1e-7) for p, q in zip(a.parameters(), b.parameters()))
    graph = sgd(torch.nn.Linear(3, 2).parameters(), torch.tensor(0.1))
    assert torch.is_tensor(graph.param_groups[0]["lr"])


def test_adam_takes_weight_decay_as_torchs_l2_term():
    net = torch.nn.Linear(3, 2)
    assert build_optimizer(net.parameters(), Recipe(weight_decay=1e-4), torch.device("cpu")).defaults["weight_decay"] == 1e-4
