"""PopulationEncoder: Gaussian receptive fields, SpikingJelly's PopEncoder, PopSpikeEncoderDeterministic
and PopSpikeEncoderRandom, outputs and gradients (issue 56.3)."""
import pytest
import torch

from plif.encoding import PopulationEncoder, make_encoder

SJ = {"activity": "PopEncoder", "regular": "PopSpikeEncoderDeterministic", "bernoulli": "PopSpikeEncoderRandom"}


def test_fields_are_gaussians_spread_over_the_mean_range():
    enc = PopulationEncoder(2, features=2, neurons=5, mean_range=(-1.0, 1.0), std=0.5)
    x = torch.tensor([[0.3, -0.8]])
    a = enc(x)
    assert a.shape == (2, 1, 10)
    centres = torch.linspace(-1, 1, 5)
    want = torch.cat([torch.exp(-0.5 * ((v - centres) / 0.5) ** 2) for v in (0.3, -0.8)])
    assert torch.allclose(a[0, 0], want, atol=1e-7) and torch.equal(a[0], a[1])
    assert [n for n, _ in enc.named_parameters()] == ["mean", "std"]  # learnable, SpikingJelly's names


@pytest.mark.parametrize("output", list(SJ))
def test_population_is_spikingjellys_outputs_and_gradients(output):
    encoding = pytest.importorskip("spikingjelly.activation_based.encoding")
    torch.manual_seed(0)
    obs = torch.rand(4, 3) * 2 - 1
    theirs = getattr(encoding, SJ[output])(3, 6, 10, (-1.0, 1.0), 0.3)
    ours = PopulationEncoder(10, features=3, neurons=6, mean_range=(-1.0, 1.0), std=0.3, output=output)
    ours.load_state_dict(theirs.state_dict())  # the same parameters, names and shapes
    torch.manual_seed(1)
    want = theirs(obs)
    torch.manual_seed(1)
    got = ours(obs)
    assert got.shape == want.shape == (10, 4, 18)
    assert torch.equal(got, want)
    if output != "activity":
        assert set(got.unique().tolist()) <= {0.0, 1.0} and 0 < got.mean() < 1
    w = torch.randn_like(got)
    g_theirs = torch.autograd.grad((want * w).sum(), [theirs.mean, theirs.std])
    g_ours = torch.autograd.grad((got * w).sum(), [ours.mean, ours.std])
    for a, b in zip(g_ours, g_theirs):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)


def test_bernoulli_draws_from_the_generator():
    enc = lambda s: PopulationEncoder(6, features=2, neurons=4, output="bernoulli",  # noqa: E731
                                      generator=torch.Generator().manual_seed(s))(torch.rand(3, 2))
    torch.manual_seed(0)
    a = enc(1)
    torch.manual_seed(0)
    assert torch.equal(a, enc(1)) and not torch.equal(a, enc(2))


def test_population_refusals():
    with pytest.raises(ValueError, match=r"PopulationEncoder: x must be \[B, \.\.\., 3\] \(features last\), got shape \[2, 4\]"):
        PopulationEncoder(4, features=3, neurons=2)(torch.rand(2, 4))
    with pytest.raises(TypeError, match=r"obs_dim= is another library's name; plif's is features="):
        PopulationEncoder(4, obs_dim=3, pop_dim=2)
    with pytest.raises(TypeError, match=r"PopulationEncoder: the arguments after T are keyword-only"):
        PopulationEncoder(4, 3, 2)
    for kw, says in [({"std": 0.0}, "std must be a finite number > 0"), ({"std": float("nan")}, "std must be"),
                     ({"mean_range": (0, float("inf"))}, "mean_range must be two finite numbers"),
                     ({"neurons": 0}, "neurons must be a positive integer"),
                     ({"output": "rate"}, "output must be one of activity, regular, bernoulli"),
                     ({"generator": torch.Generator()}, "generator is a torch.Generator for output='bernoulli'")]:
        with pytest.raises(ValueError, match=rf"PopulationEncoder: {says}"):
            PopulationEncoder(4, **{"features": 3, "neurons": 2, **kw})
    with pytest.raises(ValueError, match=r"encoder 'population' is not a network's feed \(it gives N values"):
        make_encoder("population", 4)
