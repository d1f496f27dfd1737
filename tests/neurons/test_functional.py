"""Golden membrane trajectories worked out by hand, checked on every multi-step backend."""
import math

import pytest
import torch

from plif.neurons import IF, LIF, PLIF, NeuronConfig, multi_step, neuron_step, tau_to_w

BACKENDS = ["reference", "bptt"]

# k = 1/2, V_th = 1, V_reset = 0.  H_t = V + (X - V)/2.
LEAKY_X = [0.8, 0.8, 0.8, 2.5, 0.0]
LEAKY_HARD = dict(h=[0.4, 0.6, 0.7, 1.6, 0.0], s=[0, 0, 0, 1, 0], v=[0.4, 0.6, 0.7, 0.0, 0.0])
# soft reset: V_3 = 1.6 - 1 = 0.6, H_4 = 0.6 + (0 - 0.6)/2 = 0.3
LEAKY_SOFT = dict(s=[0, 0, 0, 1, 0], v=[0.4, 0.6, 0.7, 0.6, 0.3])
# IF: H_t = V + X, Θ(0) = 1 so H = 1.0 fires.
IF_X = [0.5, 0.5, 0.5, 0.2, 1.0]
IF_HARD = dict(s=[0, 1, 0, 0, 1], v=[0.5, 0.0, 0.5, 0.7, 0.0])
IF_SOFT = dict(s=[0, 1, 0, 0, 1], v=[0.5, 0.0, 0.5, 0.7, 0.7])


def _trajectory(neuron, xs, backend):
    """Run step by step with the state carried, then check multi-step agrees."""
    x = torch.tensor(xs, dtype=torch.float64).view(-1, 1)
    v, spikes, vs = None, [], []
    for t in range(len(xs)):
        s, v = neuron.step(x[t], v)
        spikes.append(float(s.detach()))
        vs.append(float(v.detach()))
    neuron.backend = backend
    s_multi, v_last = neuron(x, return_state=True)
    assert s_multi.flatten().tolist() == spikes
    assert float(v_last.detach()) == pytest.approx(vs[-1], abs=1e-12)
    return spikes, vs


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make", [lambda **kw: LIF(tau=2.0, **kw), lambda **kw: PLIF(tau0=2.0, **kw)])
def test_leaky_hard_reset_golden(make, backend):
    s, v = _trajectory(make(), LEAKY_X, backend)
    assert s == LEAKY_HARD["s"]
    assert v == pytest.approx(LEAKY_HARD["v"], abs=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make", [lambda **kw: LIF(tau=2.0, **kw), lambda **kw: PLIF(tau0=2.0, **kw)])
def test_leaky_soft_reset_golden(make, backend):
    s, v = _trajectory(make(v_reset=None), LEAKY_X, backend)
    assert s == LEAKY_SOFT["s"]
    assert v == pytest.approx(LEAKY_SOFT["v"], abs=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_if_golden(backend):
    s, v = _trajectory(IF(), IF_X, backend)
    assert (s, v) == (IF_HARD["s"], pytest.approx(IF_HARD["v"], abs=1e-12))
    s, v = _trajectory(IF(v_reset=None), IF_X, backend)
    assert (s, v) == (IF_SOFT["s"], pytest.approx(IF_SOFT["v"], abs=1e-12))


def test_charge_values_by_hand():
    cfg = NeuronConfig()
    h_expected = LEAKY_HARD["h"]
    v = None
    for x, h in zip(LEAKY_X, h_expected):
        x_t = torch.tensor([x], dtype=torch.float64)
        v_prev = torch.zeros(1, dtype=torch.float64) if v is None else v
        assert float(v_prev + 0.5 * (x_t - v_prev)) == pytest.approx(h)
        _, v = neuron_step(x_t, v, 0.5, cfg)


def test_nonzero_reset_potential_and_threshold():
    # V_reset = -0.5, V_th = 0.5, k = 1/4: H_0 = -0.5 + (1.5 - 0)/4 = -0.125; H_1 = -0.125 + (3 - 0.375)/4
    n = LIF(tau=4.0, v_threshold=0.5, v_reset=-0.5)
    x = torch.tensor([[1.5], [3.0]], dtype=torch.float64)
    s, v = n(x, return_state=True)
    h1 = -0.125 + (3.0 - (-0.125 + 0.5)) / 4
    assert s.flatten().tolist() == [0.0, 1.0 if h1 >= 0.5 else 0.0]
    assert float(v) == pytest.approx(-0.5 if h1 >= 0.5 else h1)


def test_plif_parameterisation():
    assert tau_to_w(2.0) == 0.0
    for tau0 in (1.5, 2.0, 16.0):
        n = PLIF(tau0=tau0)
        assert float(n.tau) == pytest.approx(tau0)
        assert float(n.w.detach()) == pytest.approx(-math.log(tau0 - 1))
    with pytest.raises(ValueError, match="tau"):
        PLIF(tau0=1.0)
    assert PLIF().w.shape == ()
    assert PLIF(num_channels=5).w.shape == (5,)


def test_plif_equals_lif_with_same_tau():
    x = torch.randn(9, 3, 4, 5) * 2
    assert torch.equal(PLIF(tau0=16.0)(x), LIF(tau=16.0)(x))


def test_state_never_leaks_between_calls():
    n = PLIF()
    x = torch.rand(6, 2, 7) * 3
    first = n(x)
    assert torch.equal(n(x), first)  # no hidden state carried from the previous call


def test_multi_step_resumes_from_passed_state():
    n = LIF(tau=3.0)
    x = torch.randn(10, 4, 6) * 2
    s_all, v_all = n(x, return_state=True)
    s_a, v_a = n(x[:4], return_state=True)
    s_b, v_b = n(x[4:], v0=v_a, return_state=True)
    assert torch.equal(torch.cat([s_a, s_b]), s_all)
    assert torch.allclose(v_b, v_all)


def test_per_channel_tau_broadcasts_over_channel_dim():
    n = PLIF(num_channels=3)
    with torch.no_grad():
        n.w.copy_(torch.tensor([0.0, -math.log(3.0), -math.log(15.0)]))  # tau 2, 4, 16
    x = torch.rand(5, 2, 3, 4, 4) * 3
    out = n(x)
    for c, tau in enumerate((2.0, 4.0, 16.0)):
        assert torch.equal(out[:, :, c], LIF(tau=tau)(x[:, :, c]))


def test_bad_inputs():
    with pytest.raises(ValueError, match="surrogate"):
        NeuronConfig(surrogate="nope")
    with pytest.raises(ValueError, match="v_reset"):
        NeuronConfig(v_reset=2.0)
    with pytest.raises(ValueError, match=r"\[T, B"):
        multi_step(torch.zeros(3))
    with pytest.raises(ValueError, match="backend"):
        multi_step(torch.zeros(2, 2), backend="warp-drive")
