"""PeriodicEncoder (SpikingJelly's) and DeltaEncoder (snnTorch's spikegen.delta): sequence encoders,
time first (issue 56.3)."""
import pytest
import torch

from plif.encoding import DeltaEncoder, PeriodicEncoder, make_encoder


def test_periodic_plays_the_pattern_with_its_period():
    pattern = (torch.rand(3, 2, 4) < 0.5).float()
    out = PeriodicEncoder(8)(pattern)
    assert out.shape == (8, 2, 4)
    assert all(torch.equal(out[t], pattern[t % 3]) for t in range(8))


def test_periodic_is_spikingjellys_periodic_encoder():
    encoding = pytest.importorskip("spikingjelly.activation_based.encoding")
    pattern = (torch.rand(5, 3, 6) < 0.3).float()
    sj = encoding.PeriodicEncoder(pattern)
    want = torch.stack([sj(pattern) for _ in range(12)])
    assert torch.equal(PeriodicEncoder(12)(pattern), want)


def test_periodic_refusals():
    with pytest.raises(ValueError, match=r"PeriodicEncoder: pattern must be \[P, \.\.\.\] with P >= 1 steps, got shape \[0, 3\]"):
        PeriodicEncoder(4)(torch.zeros(0, 3))
    with pytest.raises(TypeError, match=r"PeriodicEncoder takes only T, got 1 more argument"):
        PeriodicEncoder(4, torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"encoder 'periodic' is not a network's feed \(its input is a pattern"):
        make_encoder("periodic", 4)


@pytest.mark.parametrize("padding", [False, True])
@pytest.mark.parametrize("off_spike", [False, True])
@pytest.mark.parametrize("threshold", [0.1, 1.0, 0.35])
def test_delta_is_snntorchs_spikegen_delta(padding, off_spike, threshold):
    spikegen = pytest.importorskip("snntorch.spikegen")
    torch.manual_seed(0)
    data = torch.cumsum(torch.randn(10, 3, 5) * 0.5, 0)
    want = spikegen.delta(data, threshold=threshold, padding=padding, off_spike=off_spike)
    got = DeltaEncoder(10, threshold=threshold, padding=padding, off_spike=off_spike)(data)
    assert torch.equal(got, want)


def test_delta_follows_snntorchs_examples():
    a = torch.tensor([1, 2, 2.9, 3, 3.9])
    assert DeltaEncoder(5, threshold=1)(a).tolist() == [1, 1, 0, 0, 0]
    assert DeltaEncoder(5, threshold=1, padding=True)(a).tolist() == [0, 1, 0, 0, 0]
    b = torch.tensor([1, 2, 0, 2, 2.9])
    assert DeltaEncoder(5, threshold=1, off_spike=True)(b).tolist() == [1, 1, -1, 1, 0]
    assert DeltaEncoder(5, threshold=1, padding=True, off_spike=True)(b).tolist() == [0, 1, -1, 1, 0]


def test_delta_refusals():
    with pytest.raises(ValueError, match=r"DeltaEncoder: x must be a sequence \[T, \.\.\.\] of T = 4 steps, got shape \[3, 2\]"):
        DeltaEncoder(4)(torch.zeros(3, 2))
    for bad in (0, -0.1, float("nan"), float("inf"), "0.1", True):
        with pytest.raises(ValueError, match=r"DeltaEncoder: threshold must be a finite number > 0"):
            DeltaEncoder(4, threshold=bad)
    with pytest.raises(TypeError, match=r"write DeltaEncoder\(T, threshold=0.5, padding=True\)"):
        DeltaEncoder(4, 0.5, True)
    with pytest.raises(ValueError, match=r"encoder 'delta' is not a network's feed"):
        make_encoder("delta", 4)
