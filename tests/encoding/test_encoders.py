"""plif.encoding: each encoder's definition, its range check, its randomness, SpikingJelly's encoders
and a network fed through one (issue 45.9)."""
import re

import pytest
import torch

from plif import build_network
from plif.encoding import (DirectEncoder, Intensity, LatencyEncoder, PoissonEncoder, encoder_spec, make_encoder)


def test_poisson_is_bernoulli_x_per_step_and_element():
    x = torch.tensor([0.0, 0.1, 0.5, 0.9, 1.0])
    s = PoissonEncoder(20000, generator=torch.Generator().manual_seed(3))(x)
    assert s.shape == (20000, 5) and s.dtype == x.dtype
    assert set(s.unique().tolist()) <= {0.0, 1.0}
    rate = s.mean(0)
    assert rate[0] == 0 and rate[-1] == 1  # u < x: 0 never fires, 1 at every step
    assert torch.allclose(rate[1:4], x[1:4], atol=0.015)  # 4.7 binomial sigmas at p = 0.5
    # independent over steps: the correlation of consecutive steps is about 0
    a, b = s[:-1, 2], s[1:, 2]
    assert abs(float(((a - a.mean()) * (b - b.mean())).mean())) < 0.01


def test_poisson_randomness_comes_from_the_generator_or_the_global_rng():
    x = torch.rand(2, 3, 4, 4)
    enc = lambda seed: PoissonEncoder(5, generator=torch.Generator().manual_seed(seed))(x)  # noqa: E731
    assert torch.equal(enc(1), enc(1)) and not torch.equal(enc(1), enc(2))
    torch.manual_seed(7)
    a = PoissonEncoder(5)(x)
    torch.manual_seed(7)
    assert torch.equal(PoissonEncoder(5)(x), a)


def test_poisson_draws_what_spikingjelly_draws_from_the_same_seed():
    encoding = pytest.importorskip("spikingjelly.activation_based.encoding")
    x = torch.rand(3, 6, 6).clamp_min(1e-3)  # away from 0, where SpikingJelly's u <= x may fire
    torch.manual_seed(11)
    sj = encoding.PoissonEncoder()
    want = torch.stack([sj(x) for _ in range(7)])
    torch.manual_seed(11)
    assert torch.equal(PoissonEncoder(7)(x), want)


def test_latency_fires_once_at_round_T_minus_1_times_1_minus_x():
    T = 5
    x = torch.tensor([1.0, 0.0, 0.5, 0.3, 0.625, 0.875])
    s = LatencyEncoder(T)(x)
    assert torch.equal(s.sum(0), torch.ones(6))  # one spike per element
    # (T-1)(1-x) = 0, 4, 2, 2.8, 1.5, 0.5: round half to even -> 0, 4, 2, 3, 2, 0
    assert s.argmax(0).tolist() == [0, 4, 2, 3, 2, 0]


def test_latency_is_spikingjelly_linear_latency_encoder():
    encoding = pytest.importorskip("spikingjelly.activation_based.encoding")
    x = torch.rand(4, 2, 7, 7)
    for T in (1, 2, 8):
        sj = encoding.LatencyEncoder(T, enc_function="linear")
        assert torch.equal(LatencyEncoder(T)(x), torch.stack([sj(x) for _ in range(T)]))


def test_direct_is_a_view_repeating_the_input():
    x = torch.randn(2, 3, 4)
    out = DirectEncoder(6)(x)
    assert out.shape == (6, 2, 3, 4) and out.data_ptr() == x.data_ptr()
    assert torch.equal(out, x.repeat(6, 1, 1, 1))


@pytest.mark.parametrize("enc", [PoissonEncoder(3), LatencyEncoder(3)], ids=["poisson", "latency"])
@pytest.mark.parametrize("bad, shown", [(torch.tensor([0.2, 1.5, -0.5]), "2 of 3 values outside (min -0.5, max 1.5)"),
                                        (torch.tensor([0.2, float("nan")]), "1 of 2 values outside")])
def test_values_outside_0_1_are_refused_in_one_line(enc, bad, shown):
    with pytest.raises(ValueError, match=rf"{type(enc).__name__}: input must lie in \[0, 1\].*{re.escape(shown)}"):
        enc(bad)
    unchecked = type(enc)(3, check=False)
    assert unchecked(bad).shape == (3, *bad.shape)


def test_encoders_compile_to_one_graph():
    """No host read and no data-dependent branch: the whole encoder is one graph."""
    x = torch.rand(2, 3)
    assert torch.compile(PoissonEncoder(4), fullgraph=True, backend="eager")(x).shape == (4, 2, 3)
    assert torch.equal(torch.compile(LatencyEncoder(4), fullgraph=True, backend="eager")(x), LatencyEncoder(4)(x))


def test_make_encoder_names_and_errors():
    assert make_encoder(None, 4) is None and make_encoder("direct", 4) is None
    assert isinstance(make_encoder("poisson", 4), PoissonEncoder)
    with pytest.raises(ValueError, match=r"unknown encoder 'rate'; valid: direct, poisson, latency"):
        make_encoder("rate", 4)
    with pytest.raises(ValueError, match=r"LatencyEncoder has T = 3, the network T = 4"):
        make_encoder(LatencyEncoder(3), 4)
    with pytest.raises(ValueError, match=r"give both mean and std"):
        make_encoder({"name": "poisson", "mean": [0.5]}, 4)
    with pytest.raises(ValueError, match=r"expected \{'name'"):
        make_encoder({"kind": "poisson"}, 4)
    assert encoder_spec("direct", [0.5], [0.2]) is None
    assert encoder_spec("latency", (0.5,), (0.25,)) == {"name": "latency", "mean": [0.5], "std": [0.25]}


def test_intensity_undoes_the_pipelines_normalisation():
    from plif.data.transforms import normalize

    mean, std = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)
    pixels = torch.arange(256, dtype=torch.uint8).view(1, 1, 16, 16).expand(2, 3, 16, 16)
    back = Intensity(mean, std)(normalize(pixels, mean, std))
    assert back.min() >= 0 and back.max() <= 1
    assert torch.allclose(back, pixels.float() / 255, atol=1e-6, rtol=0)
    # so latency spike times are those of the raw intensities
    assert torch.equal(LatencyEncoder(8)(back), LatencyEncoder(8)(pixels.float() / 255))
    with pytest.raises(ValueError, match="std > 0"):
        Intensity([0.5], [0.0])
    # its constants move with the network (no copy from the host per call: CUDA graphs) and are not stored
    net = build_network("FC10-PLIF", (3, 4, 4), 2, encoder={"name": "poisson", "mean": list(mean), "std": list(std)})
    assert [n for n, _ in net.named_buffers()] == ["encoder.intensity._mean", "encoder.intensity._std"]
    assert "encoder.intensity._mean" not in net.state_dict()
    assert net.to(torch.float64).encoder.intensity._mean.dtype == torch.float64


def test_a_network_with_an_encoder_runs_the_encoded_input():
    spec, shape = "c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF", (1, 8, 8)
    torch.manual_seed(0)
    net = build_network(spec, shape, 4, encoder="poisson")
    torch.manual_seed(0)
    plain = build_network(spec, shape, 4)
    assert net.state_dict().keys() == plain.state_dict().keys()  # no parameters, no buffers
    net.load_state_dict(plain.state_dict())
    x = torch.rand(3, *shape)
    torch.manual_seed(5)
    out = net(x)
    torch.manual_seed(5)
    assert torch.equal(out, plain(PoissonEncoder(4)(x)))  # the encoded spikes through the plain network
    frames = (torch.rand(4, 3, *shape) < 0.3).float()
    assert torch.equal(net(frames), plain(frames))  # frames are fed as they are
    # direct: the default feed (hoisted first conv), bit for bit
    assert torch.equal(build_network(spec, shape, 4, encoder="direct").eval()(x), plain.eval()(x))


def test_latency_encoded_network_trains_with_gradients():
    net = build_network("c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF", (1, 8, 8), 4, encoder="latency")
    net(torch.rand(3, 1, 8, 8)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
