"""LatencyEncoder(T, function="log"): SpikingJelly's log latency code, and keyword-only options
(issue 53.7, issue 56.3)."""
import pytest
import torch

from plif.encoding import LatencyEncoder, latency_times, make_encoder


def test_log_latency_is_spikingjellys_enc_function_log():
    encoding = pytest.importorskip("spikingjelly.activation_based.encoding")
    torch.manual_seed(0)
    x = torch.cat([torch.rand(4, 2, 7, 7).flatten(), torch.tensor([0.0, 1.0, 0.5])])
    for T in (1, 2, 5, 8, 16, 40, 89):
        sj = encoding.LatencyEncoder(T, enc_function="log")
        want = torch.stack([sj(x) for _ in range(T)])
        assert torch.equal(LatencyEncoder(T, function="log")(x), want), T


def test_log_latency_fires_once_brightest_first_and_is_not_linear():
    x = torch.tensor([1.0, 0.5, 0.1, 0.0])
    s = LatencyEncoder(8, function="log")(x)
    assert torch.equal(s.sum(0), torch.ones(4))
    # (T-1) - ln((e^7 - 1) x + 1) = 0, 0.69, 2.29, 7; linear: 0, 3.5, 6.3, 7
    assert s.argmax(0).tolist() == [0, 1, 2, 7]
    assert LatencyEncoder(8)(x).argmax(0).tolist() == [0, 4, 6, 7]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_log_latency_past_the_overflow_of_alpha_still_codes(dtype):
    """alpha = e^(T-1) - 1 overflows float32 beyond T = 89 (SpikingJelly's then raises): the same
    times come from -ln(x + (1 - x) e^(1-T))."""
    x = torch.tensor([1.0, 0.5, 0.05, 1e-3, 0.0], dtype=dtype)
    for T in (100, 1000):
        t = latency_times(x, T, "log")
        assert torch.isfinite(t).all()
        s = LatencyEncoder(T, function="log")(x)
        assert torch.equal(s.sum(0), torch.ones(5, dtype=dtype))
        assert s.argmax(0).tolist() == [0, 1, 3, 7, T - 1]  # -ln x rounded; x = 0 at the last step
    # and where both forms are finite they agree to rounding
    x64 = torch.rand(1000, dtype=torch.float64)
    stable = -torch.log(x64 + (1 - x64) * torch.exp(torch.tensor(-9.0, dtype=torch.float64)))
    assert torch.allclose(latency_times(x64, 10, "log"), stable, atol=1e-12)


def test_latency_log_is_a_train_encoder():
    enc = make_encoder("latency-log", 8)
    assert isinstance(enc, LatencyEncoder) and enc.function == "log" and enc.name == "latency-log"
    stored = make_encoder({"name": "latency-log", "mean": [0.5], "std": [0.25]}, 8)
    assert stored.encoder.function == "log" and stored.name == "latency-log"


def test_arguments_after_T_are_keyword_only():
    with pytest.raises(TypeError, match=r"^LatencyEncoder: the arguments after T are keyword-only \(function=, check=\); "
                                        r"write LatencyEncoder\(T, function='log'\)$"):
        LatencyEncoder(8, "log")
    with pytest.raises(TypeError, match=r"enc_function= is another library's name; plif's is function="):
        LatencyEncoder(8, enc_function="log")
    with pytest.raises(ValueError, match=r"function must be one of linear, log, got 'exp'"):
        LatencyEncoder(8, function="exp")
