"""The ``--cuda-graph`` step logic, run eagerly on the CPU, equals the ordinary step; CUDA-only
options refuse clearly here."""
import pytest
import torch

from plif.models import build_network
from plif.train import train
from plif.train.graph import GraphTrainer, _Snapshot, autocast_context, check_graph_options
from plif.train.loop import evaluate, train_epoch, train_step
from plif.train.optim import adam, graph_adam
from plif_testing import tiny_train_argv, tiny_train_config

SPEC = "{c4k3s1-BN-PLIF-MPk2s2}*2-DP-FC16-PLIF-DP-FC20-PLIF-APk2s2"
SHAPE = (1, 8, 8)


def _net():
    torch.manual_seed(0)
    return build_network(SPEC, SHAPE, 3)


def _batches(sizes, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [(torch.rand(b, *SHAPE, generator=gen) * 3, torch.randint(0, 10, (b,), generator=gen)) for b in sizes]


def test_eager_graph_logic_matches_the_normal_step():
    """Training (with a short last batch, which gets its own slot), the lr tensor updated by the
    cosine schedule, and padded+masked evaluation all agree with plif.train.loop."""
    ref, new = _net(), _net()
    opt_ref = adam(ref.parameters(), 2e-3)
    opt_new = graph_adam(new.parameters(), 2e-3, torch.device("cpu"))
    sch_ref = torch.optim.lr_scheduler.CosineAnnealingLR(opt_ref, T_max=3)
    sch_new = torch.optim.lr_scheduler.CosineAnnealingLR(opt_new, T_max=3)
    trainer = GraphTrainer(new, opt_new, 10, torch.device("cpu"), capture=False)
    lr_tensor = opt_new.param_groups[0]["lr"]
    for epoch in range(2):
        train_batches = _batches((4, 4, 3), seed=epoch)
        torch.manual_seed(10 + epoch)
        a = train_epoch(ref, opt_ref, train_batches, 10)
        torch.manual_seed(10 + epoch)
        b = trainer.train_epoch(train_batches)
        assert a[2] == b[2] == 11
        assert a[0] == pytest.approx(b[0], rel=1e-5) and a[1] == b[1]
        sch_ref.step()
        sch_new.step()
        assert opt_new.param_groups[0]["lr"] is lr_tensor  # filled in place: a graph keeps reading it
        assert float(lr_tensor) == pytest.approx(opt_ref.param_groups[0]["lr"])
    for p, q in zip(ref.parameters(), new.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    assert len(trainer._train) == 2  # one slot per training batch shape, reused across epochs

    test = _batches((5, 5, 2), seed=9)
    a = evaluate(ref, test, 10)
    b = trainer.evaluate(test, batch_size=5)
    assert a[2] == b[2] == 12 and a[1] == b[1]
    assert a[0] == pytest.approx(b[0], rel=1e-5)
    assert len(trainer._eval) == 1  # the short batch is padded into the same buffer


def test_padding_is_masked_out():
    net = _net()
    trainer = GraphTrainer(net, graph_adam(net.parameters(), 1e-3, torch.device("cpu")), 10,
                           torch.device("cpu"), capture=False)
    (x, y), = _batches((3,))
    full = trainer.evaluate([(x, y)], batch_size=3)
    padded = trainer.evaluate([(x, y)], batch_size=8)
    assert padded[2] == 3 and padded[1] == full[1] and padded[0] == pytest.approx(full[0], rel=1e-6)
    with pytest.raises(ValueError, match="exceeds the static buffer"):
        trainer.evaluate([(x, y)], batch_size=2)


def test_snapshot_restores_model_optimiser_and_rng():
    net = _net()
    opt = graph_adam(net.parameters(), 1e-2, torch.device("cpu"))
    before = [t.clone() for t in list(net.parameters()) + list(net.buffers())]
    snap = _Snapshot(net, opt, torch.device("cpu"))
    (x, y), = _batches((4,))
    trainer = GraphTrainer(net, opt, 10, torch.device("cpu"), capture=False)
    draw = torch.rand(3)
    trainer.train_step(x, y)  # a warm-up step: moves weights, BN statistics and Adam state
    snap.restore()
    for t, b in zip(list(net.parameters()) + list(net.buffers()), before):
        assert torch.equal(t, b)
    assert all(float(v.abs().sum()) == 0 for s in opt.state.values() for v in s.values() if torch.is_tensor(v))
    assert torch.equal(torch.rand(3), draw)  # the RNG is where it was


def test_capture_refuses_without_cuda():
    with pytest.raises(ValueError, match="CUDA-graph capture needs a CUDA device"):
        GraphTrainer(_net(), None, 10, torch.device("cpu"))


@pytest.mark.parametrize("kwargs,match", [
    ({"cuda_graph": True}, "--cuda-graph needs a CUDA device, but this run is on cpu"),
    ({"amp": "fp8"}, "--amp 'fp8': unknown; valid: bf16"),
])
def test_cuda_only_options_refuse_on_cpu(kwargs, match, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=match):
        train(tiny_train_config(tmp_path, out, **kwargs))
    assert not out.exists()  # refused before anything was written


def test_amp_is_refused_where_autocast_is_not_validated():
    with pytest.raises(ValueError, match="--amp bf16: autocast is validated on CUDA and the CPU only, but this run "
                                         "is on meta"):
        check_graph_options(torch.device("meta"), False, "bf16")
    check_graph_options(torch.device("cpu"), False, "bf16")  # allowed since the CPU path was validated


def test_graph_and_torchrun_do_not_combine_but_graph_and_compile_do(tmp_path):
    cuda = torch.device("cuda")
    with pytest.raises(ValueError, match="single-process"):
        check_graph_options(cuda, True, None, world=2)
    check_graph_options(cuda, True, None)  # --compile runs inside the graph: nothing to refuse
    with pytest.raises(ValueError, match="--cuda-graph needs a CUDA device") as e:  # the CPU, not the pair
        train(tiny_train_config(tmp_path, tmp_path / "run", cuda_graph=True, compile=True))
    assert "cannot be combined" not in str(e.value)


class _Counted(torch.nn.Module):
    """A stand-in for ``torch.compile(model)``: the same module, its calls counted."""

    def __init__(self, model):
        super().__init__()
        self.model, self.calls = model, 0

    def forward(self, x):
        self.calls += 1
        return self.model(x)


def test_the_forward_runs_net_and_the_state_stays_the_models():
    """``net`` (the compiled network under --compile) is what the step and evaluation call; the
    snapshot and the parameters are the model's, so the step equals plif's step on ``net``."""
    ref, model = _net(), _net()
    net = _Counted(model)
    trainer = GraphTrainer(model, graph_adam(model.parameters(), 2e-3, torch.device("cpu")), 10,
                           torch.device("cpu"), capture=False, net=net)
    opt_ref = graph_adam(ref.parameters(), 2e-3, torch.device("cpu"))
    batches = _batches((4, 4))
    torch.manual_seed(3)
    trainer.train_epoch(batches)
    torch.manual_seed(3)
    for x, y in batches:
        train_step(ref, opt_ref, x, y, 10)
    assert net.calls == 2 and trainer.evaluate(_batches((3,)), batch_size=4)[2] == 3 and net.calls == 3
    for p, q in zip(ref.parameters(), model.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)


def test_cli_flags_reach_the_config(tmp_path, capsys):
    from plif.cli.main import main

    assert main(tiny_train_argv(tmp_path, tmp_path / "run", cuda_graph=True, max_train_samples=8)) == 2
    assert "--cuda-graph needs a CUDA device" in capsys.readouterr().err and not (tmp_path / "run").exists()


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)`")
def test_a_float_lr_becomes_a_tensor_the_schedule_fills():
    """Resuming an eager run's checkpoint gives a float lr; a graph would freeze it."""
    net = _net()
    opt = adam(net.parameters(), 1e-3)
    GraphTrainer(net, opt, 10, torch.device("cpu"), capture=False)
    lr = opt.param_groups[0]["lr"]
    assert torch.is_tensor(lr)
    torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=2).step()
    assert opt.param_groups[0]["lr"] is lr and float(lr) == pytest.approx(5e-4)


def test_amp_step_logic_runs_eagerly():
    """The graph trainer's bf16 autocast path runs eagerly on the CPU, so a typo in it cannot hide
    until a GPU session: its convolutions run in bf16, it trains as plif's ordinary step under the
    same autocast does, and weights stay fp32."""
    cpu = torch.device("cpu")
    ref, net = _net(), _net()
    opt_ref = adam(ref.parameters(), 1e-3)
    trainer = GraphTrainer(net, graph_adam(net.parameters(), 1e-3, cpu), 10, cpu, capture=False, amp="bf16")
    conv_dtypes = []
    # A hook on the first conv runs the composed layers (the fused block never shows the conv's output), so
    # both networks get one: the same path on both sides, and the reference's record is dropped.
    net.layers[0].layer.register_forward_hook(lambda m, i, out: conv_dtypes.append(out.dtype))
    ref.layers[0].layer.register_forward_hook(lambda m, i, out: None)
    batches = _batches((4, 4))
    torch.manual_seed(10)
    loss, acc, n = trainer.train_epoch(batches)
    torch.manual_seed(10)
    steps = [train_step(ref, opt_ref, x, y, 10, autocast=lambda: autocast_context(cpu, "bf16")) for x, y in batches]
    assert n == 8 and conv_dtypes == [torch.bfloat16] * 2
    assert loss == pytest.approx(sum(float(s[0]) * 4 for s in steps) / 8, rel=1e-5)
    assert acc == sum(int(s[1]) for s in steps) / 8
    for p, q in zip(ref.parameters(), net.parameters()):
        assert q.dtype == torch.float32
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    assert trainer.evaluate(_batches((3,)), batch_size=4)[2] == 3


def test_graph_step_is_the_loop_step_and_flags_divergence():
    """The graph trainer runs plif.train.loop.train_step, finiteness flag included: a NaN that
    reaches the parameters stops the epoch (before, the graph step had its own copy without it)."""
    from plif.train.loop import Diverged

    net = _net()
    trainer = GraphTrainer(net, graph_adam(net.parameters(), 2e-3, torch.device("cpu")), 10,
                           torch.device("cpu"), capture=False)
    x, y = _batches((4,))[0]
    x[0, 0, 0, 0] = float("nan")
    with pytest.raises(Diverged):
        trainer.train_epoch([(x, y)])
    trainer.reset_totals()
    assert bool(trainer.finite)  # each epoch starts with a clean flag


def test_the_evaluation_pads_time_major_batches_along_their_batch_dimension():
    """Event frames and a --model network's input are [T, B, ...]: the static evaluation buffer was
    padded along dim 0 (T), and a short batch failed to copy into it."""
    torch.manual_seed(0)
    net = build_network("FC20-PLIF-FC100-PLIF-APk10s10", (2, 4, 4), 3)
    x, y = (torch.rand(3, 10, 2, 4, 4) > 0.5).float(), torch.arange(10) % 10
    batches = [(x[:, i:i + 4], y[i:i + 4]) for i in (0, 4, 8)]  # the last one short: padded and masked
    trainer = GraphTrainer(net, None, 10, torch.device("cpu"), capture=False, time_major=True)
    assert trainer.evaluate(batches, 4) == evaluate(net, batches, 10)


def test_the_graph_steps_a_recipe_as_the_normal_step_does():
    """issue 56: --loss tet with SGD (its rate a tensor the warm-up schedule fills) through the graph
    trainer's logic equals plif.train.loop's step and evaluation with the same loss; a momentum buffer
    zeroed after warm-up (what _Snapshot leaves) steps as a fresh one (dampening 0)."""
    from plif.train.loss import Loss
    from plif.train.optim import Recipe, WarmupCosineLR, build_optimizer

    loss = Loss("tet", label_smoothing=0.1, tet_lambda=0.05, tet_phi=0.5)
    recipe, cpu = Recipe("sgd", lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3), torch.device("cpu")
    ref, new = _net(), _net()
    opt_ref, opt_new = build_optimizer(ref.parameters(), recipe, cpu), build_optimizer(new.parameters(), recipe, cpu, True)
    sch_ref, sch_new = WarmupCosineLR(opt_ref, 1, 3), WarmupCosineLR(opt_new, 1, 3)
    trainer = GraphTrainer(new, opt_new, 10, cpu, capture=False, loss=loss)
    snap = _Snapshot(new, opt_new, cpu)
    trainer.train_step(*_batches((4,), seed=5)[0])  # a warm-up step, undone
    snap.restore()
    for epoch in range(2):
        train_batches = _batches((4, 4, 3), seed=epoch)
        torch.manual_seed(10 + epoch)
        a = train_epoch(ref, opt_ref, train_batches, 10, loss=loss)
        torch.manual_seed(10 + epoch)
        b = trainer.train_epoch(train_batches)
        assert a[0] == pytest.approx(b[0], rel=1e-5) and a[1] == b[1]
        sch_ref.step()
        sch_new.step()
        assert float(opt_new.param_groups[0]["lr"]) == pytest.approx(opt_ref.param_groups[0]["lr"])
    for p, q in zip(ref.parameters(), new.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    test = _batches((5, 5, 2), seed=9)
    a, b = evaluate(ref, test, 10, loss=loss), trainer.evaluate(test, batch_size=5)
    assert a[1] == b[1] and a[0] == pytest.approx(b[0], rel=1e-5) and a[0] != evaluate(ref, test, 10)[0]
