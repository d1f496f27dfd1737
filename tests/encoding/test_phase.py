"""WeightedPhaseEncoder: x in binary, one digit per step, SpikingJelly's weighted phase code (issue 56.3)."""
import math

import pytest
import torch

from plif.encoding import WeightedPhaseEncoder, make_encoder


def test_phase_spikes_are_the_binary_digits_of_x():
    T = 8
    k = torch.arange(2 ** T, dtype=torch.float64)
    s = WeightedPhaseEncoder(T)(k / 2 ** T)  # every multiple of 2^-8 in [0, 1)
    weights = 2.0 ** -torch.arange(1, T + 1, dtype=torch.float64)
    assert torch.equal((s * weights[:, None]).sum(0), k / 2 ** T)  # x comes back exactly
    # the paper's table (Kim et al. 2018, K = 8)
    table = {192: [1, 1, 0, 0, 0, 0, 0, 0], 1: [0, 0, 0, 0, 0, 0, 0, 1], 128: [1, 0, 0, 0, 0, 0, 0, 0],
             255: [1] * 8}
    for v, digits in table.items():
        assert s[:, v].tolist() == digits


def test_phase_is_spikingjellys_weighted_phase_encoder():
    encoding = pytest.importorskip("spikingjelly.activation_based.encoding")
    torch.manual_seed(0)
    for T in (1, 3, 8, 20):
        x = torch.rand(3, 2, 5, 5) * (1 - 2.0 ** -T)  # SpikingJelly's domain [0, 1 - 2^-T]
        sj = encoding.WeightedPhaseEncoder(T)
        assert torch.equal(WeightedPhaseEncoder(T)(x), torch.stack([sj(x) for _ in range(T)])), T


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_one_saturates_and_long_codes_stop_at_the_dtypes_last_digit(dtype):
    one = WeightedPhaseEncoder(8)(torch.tensor([1.0], dtype=dtype))
    assert one.flatten().tolist() == [1.0] * 8  # 255/255 codes as 255/256
    tiny = torch.finfo(dtype).smallest_normal * torch.finfo(dtype).eps  # 2^-149 in float32
    s = WeightedPhaseEncoder(1200)(torch.tensor([0.0, tiny], dtype=dtype))
    assert s[:, 0].sum() == 0  # no digit of 0 fires, however many steps
    # exactly one digit, the smallest number's: 2^-149 at step 148 in float32, 2^-1074 at 1073 in float64
    assert s[:, 1].sum() == 1 and s[:, 1].argmax() == -math.log2(tiny) - 1


def test_phase_is_a_train_encoder():
    enc = make_encoder({"name": "phase", "mean": [0.5], "std": [0.5]}, 4)
    x = torch.tensor([[[[-1.0, 1.0]]]])  # normalised 0 and 1
    assert enc(x)[:, 0, 0, 0].T.tolist() == [[0, 0, 0, 0], [1, 1, 1, 1]]
    with pytest.raises(TypeError, match=r"WeightedPhaseEncoder: the arguments after T are keyword-only \(check=\)"):
        WeightedPhaseEncoder(8, False)
    with pytest.raises(ValueError, match=r"WeightedPhaseEncoder: input must lie in \[0, 1\]"):
        WeightedPhaseEncoder(8)(torch.tensor([1.5]))
