"""Bad input to an encoder is refused in one line naming the argument and what it takes (issue 53:
the tracebacks of int64 / bool / complex / numpy / list input and of T = 10**6 or 2**40, item 7's NaN
mean and std and positional options)."""
import numpy as np
import pytest
import torch

from plif import build_network
from plif.encoding import (DeltaEncoder, DirectEncoder, LatencyEncoder, PeriodicEncoder, PoissonEncoder,
                           PopulationEncoder, WeightedPhaseEncoder, make_encoder)
from plif.encoding import base

STATIC = [PoissonEncoder, LatencyEncoder, DirectEncoder, WeightedPhaseEncoder]


def _all(T=4):
    return [cls(T) for cls in STATIC] + [PeriodicEncoder(T), DeltaEncoder(T), PopulationEncoder(T, features=3, neurons=2)]


@pytest.mark.parametrize("enc", _all(), ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("x, says", [
    (np.zeros((4, 3), dtype=np.float32), r"x must be a torch.Tensor, got numpy.ndarray; convert it with torch.from_numpy\(x\)"),
    ([[0.1, 0.2, 0.3]] * 4, r"x must be a torch.Tensor, got list; make one with torch.tensor\(x, dtype=torch.float32\)"),
    (torch.zeros(4, 3, dtype=torch.int64), r"x must be a floating-point tensor, got torch.int64; convert it to float"),
    (torch.zeros(4, 3, dtype=torch.bool), r"x must be a floating-point tensor, got torch.bool"),
    (torch.zeros(4, 3, dtype=torch.complex64), r"x must be a real floating-point tensor, got torch.complex64"),
], ids=["numpy", "list", "int64", "bool", "complex"])
def test_input_that_is_no_real_float_tensor_is_refused_in_one_line(enc, x, says):
    with pytest.raises(TypeError, match=rf"^{type(enc).__name__}: {says}") as e:
        enc(x)
    assert "\n" not in str(e.value)


def test_integer_images_are_told_to_scale():
    with pytest.raises(TypeError, match=r"convert it to float and scale it to \[0, 1\] \(x.float\(\) / 255 for 8-bit"):
        PoissonEncoder(4)(torch.randint(0, 256, (2, 1, 4, 4), dtype=torch.uint8))


@pytest.mark.parametrize("cls", STATIC, ids=lambda c: c.__name__)
@pytest.mark.parametrize("T", [10 ** 6, 2 ** 40])
def test_an_output_beyond_the_free_memory_is_refused_with_its_size(cls, T, monkeypatch):
    import plif.device

    monkeypatch.setattr(plif.device, "free_memory", lambda device: 8 * 10 ** 9)  # 8 GB free, whatever this machine has
    with pytest.raises(ValueError, match=rf"^{cls.__name__}: T = {T} steps of a \[16, 1, 28, 28\] input need about "
                                         r"[\d.,]+ [GTP]B for the .*, more than the 8.0 GB free on cpu; lower T or the batch size$"):
        cls(T)(torch.rand(16, 1, 28, 28))


def test_the_size_check_asks_for_free_memory_only_beyond_a_gigabyte(monkeypatch):
    import plif.device

    asked = []
    monkeypatch.setattr(plif.device, "free_memory", lambda device: asked.append(device) or 10 ** 15)
    PoissonEncoder(8)(torch.rand(2, 3))
    assert asked == []
    base.check_size("E", 10 ** 6, torch.rand(16, 1, 28, 28), 9)
    assert asked == [torch.device("cpu")]
    # 2^40 steps x 12,544 values x (4 + 1) bytes (the spikes and each step's comparison)
    with pytest.raises(ValueError, match=r"T = 1099511627776 steps .* need about 69.0 PB for the output .* than the 1.0 PB"):
        LatencyEncoder(2 ** 40)(torch.rand(16, 1, 28, 28))


@pytest.mark.parametrize("cls", [PoissonEncoder, LatencyEncoder, WeightedPhaseEncoder], ids=lambda c: c.__name__)
def test_a_positional_option_is_refused_naming_its_keyword(cls):
    with pytest.raises(TypeError, match=rf"^{cls.__name__}: the arguments after T are keyword-only"):
        cls(8, False)
    with pytest.raises(TypeError, match=r"^DirectEncoder takes only T, got 1 more argument: \(False,\)$"):
        DirectEncoder(8, False)


def test_poisson_positional_generator_names_generator():
    with pytest.raises(TypeError, match=r"write PoissonEncoder\(T, generator=<torch._C.Generator"):
        PoissonEncoder(8, torch.Generator())
    with pytest.raises(TypeError, match=r"PoissonEncoder: generator must be a torch.Generator or None, got int"):
        PoissonEncoder(8, generator=3)


@pytest.mark.parametrize("mean, std, says", [
    ([float("nan")], [1.0], "mean must be finite"),
    ([0.5], [float("nan")], "std must be finite"),
    ([0.5], [float("inf")], "std must be finite"),
    ([0.5], [0.0], r"std must be > 0"),
    ([0.5], [-1.0], r"std must be > 0"),
    ([0.5, 0.5], [0.2], "mean and std need one value per channel each, got 2 and 1"),
    ([], [], "mean must be a non-empty list of numbers"),
    (["a"], [1.0], "mean must be a non-empty list of numbers"),
    (0.5, [1.0], "mean must be a non-empty list of numbers"),
])
def test_make_encoder_refuses_a_mean_or_std_that_cannot_normalise(mean, std, says):
    with pytest.raises(ValueError, match=rf"^Intensity: {says}"):
        make_encoder({"name": "poisson", "mean": mean, "std": std}, 4)


def test_mean_and_std_must_fit_the_channels_where_known():
    spec = {"name": "latency", "mean": [0.5, 0.5], "std": [0.2, 0.2]}
    with pytest.raises(ValueError, match=r"Intensity: mean and std have 2 values, the input has 3 channels"):
        build_network("FC10-PLIF", (3, 4, 4), 2, encoder=spec)
    assert make_encoder(spec, 2, channels=2) is not None
    one = build_network("FC10-PLIF", (3, 4, 4), 2, encoder={"name": "latency", "mean": [0.5], "std": [0.2]})
    assert one.encoder.intensity(torch.rand(2, 3, 4, 4)).shape == (2, 3, 4, 4)  # one value for every channel
    enc = make_encoder(spec, 2)  # channels unknown: checked on the input
    with pytest.raises(ValueError, match=r"Intensity: mean and std have 2 values \(one per channel\), the input \[1, 3, 4\] "
                                         r"has 3 channels \(dim 1\)"):
        enc(torch.rand(1, 3, 4))
