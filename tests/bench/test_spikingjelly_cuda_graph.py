"""The GPU script's strongest SpikingJelly row (issue 55.6): SpikingJelly's own CUDA-graph execution mode,
wired as its train_classify wires it.  Its StaticCudaGraph needs CUDA; on the CPU a pass-through stand-in
checks the wiring: the same step as SpikingJelly's eager one (forward, plif's loss, backward, Adam, reset)."""
import pytest
import torch

from plif.bench.spikingjelly import spikingjelly_unavailable
from plif.bench.train import bench_train

pytestmark = pytest.mark.skipif(spikingjelly_unavailable() is not None,
                                reason=f"SpikingJelly unavailable: {spikingjelly_unavailable()}")


def test_the_variant_needs_cuda():
    with pytest.raises(ValueError, match="variant 'spikingjelly\\+cuda-graph' needs a CUDA device"):
        bench_train("fashion-mnist", (2,), "cpu", ["spikingjelly+cuda-graph"], T=2)


def test_its_step_trains_as_spikingjellys_eager_step(monkeypatch):
    from spikingjelly.activation_based import _cuda_graph

    from plif.bench.train import _spikingjelly_cuda_graph_step, _step_fn
    from plif.bench.twin import spikingjelly_twin
    from plif.models import build_network

    calls = []

    class PassThrough:  # StaticCudaGraph's interface, eager
        def __init__(self, function, warmup_steps):
            self.function, self.warmup_steps = function, warmup_steps

        def __call__(self, *inputs):
            calls.append(len(inputs))
            return self.function(*inputs)

    monkeypatch.setattr(_cuda_graph, "StaticCudaGraph", PassThrough)
    nets = []
    for _ in range(2):
        torch.manual_seed(0)
        nets.append(spikingjelly_twin(build_network("c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF", (1, 8, 8), 2), "cpu"))
    x, y = torch.rand(2, 3, 1, 8, 8), torch.tensor([1, 2, 3])
    (graphed, reset), (eager, reset_eager) = nets
    step_a = _spikingjelly_cuda_graph_step(graphed, x, y, 10, reset)
    step_b = _step_fn(eager, x, y, 10, after=reset_eager)
    before = [t.clone() for t in graphed.state_dict().values()]
    for _ in range(2):
        step_a()
        step_b()
    assert calls == [2, 2]
    assert not all(torch.equal(a, b) for a, b in zip(before, graphed.state_dict().values()))  # it trained
    for a, b in zip(graphed.state_dict().values(), eager.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
