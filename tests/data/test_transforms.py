import pytest
import torch

from plif.catalog import get_dataset
from plif.data.transforms import (affine_theta, apply_affine, augment_for, identity, normalize, random_affine,
                                  random_crop_flip)


def batch(B=6, C=1, H=28, W=28, seed=0):
    return torch.randint(0, 256, (B, C, H, W), generator=torch.Generator().manual_seed(seed), dtype=torch.uint8)


def test_normalize_values():
    x = torch.tensor([0, 255, 51], dtype=torch.uint8).view(1, 1, 1, 3)
    y = normalize(x, (0.2,), (0.5,))
    assert y.dtype == torch.float32 and y.shape == (1, 1, 1, 3)
    assert torch.allclose(y.flatten(), torch.tensor([-0.4, 1.6, 0.0]), atol=1e-6)
    x3 = torch.full((2, 3, 4, 4), 255, dtype=torch.uint8)
    y3 = normalize(x3, (0.0, 0.5, 1.0), (1.0, 0.5, 0.25))
    assert torch.allclose(y3[:, :, 0, 0], torch.tensor([1.0, 1.0, 0.0]).expand(2, 3))
    assert torch.equal(normalize(x3.float(), (0.0, 0.5, 1.0), (1.0, 0.5, 0.25)), y3)  # float = same 0..255 scale
    with pytest.raises(ValueError, match="do not fit 3 channels"):
        normalize(x3, (0.1, 0.2), (1.0, 1.0))


def test_affine_identity_exact():
    x = batch()
    g = torch.Generator().manual_seed(1)
    for mode in ("nearest", "bilinear"):
        y = random_affine(x, degrees=0, translate=0, scale=(1, 1), generator=g, mode=mode)
        assert y.dtype == torch.uint8 and torch.equal(y, x)
    xf = x.float()
    assert torch.allclose(random_affine(xf, 0, 0, (1, 1), mode="bilinear"), xf, atol=1e-3)  # fp of the grid


def test_affine_rotation_and_translation_are_exact_pixel_moves():
    x = batch(2, 1, 6, 6)
    one = torch.ones(2, dtype=torch.float64)
    zero = torch.zeros(2, dtype=torch.float64)
    rot = apply_affine(x, affine_theta(90 * one, zero, zero, one, (6, 6)))
    assert torch.equal(rot, torch.rot90(x, 1, (-2, -1)))  # counter-clockwise on screen
    shifted = apply_affine(x, affine_theta(zero, 2 * one, one, one, (6, 6)))
    expect = torch.zeros_like(x)
    expect[:, :, 1:, 2:] = x[:, :, :-1, :-2]  # right by 2, down by 1, zero fill
    assert torch.equal(shifted, expect)


def test_affine_nonsquare_rotation():
    x = batch(1, 2, 4, 8)
    one = torch.ones(1, dtype=torch.float64)
    zero = torch.zeros(1, dtype=torch.float64)
    y = apply_affine(x, affine_theta(180 * one, zero, zero, one, (4, 8)))
    assert torch.equal(y, torch.flip(x, (-2, -1)))


def test_affine_random_deterministic_and_per_sample():
    x = batch(8)
    a = random_affine(x, generator=torch.Generator().manual_seed(3))
    b = random_affine(x, generator=torch.Generator().manual_seed(3))
    c = random_affine(x, generator=torch.Generator().manual_seed(4))
    assert a.shape == x.shape and a.dtype == x.dtype and torch.equal(a, b) and not torch.equal(a, c)
    same = random_affine(x[:1].expand(8, -1, -1, -1), generator=torch.Generator().manual_seed(3))
    assert len({s.numpy().tobytes() for s in same}) == 8  # each sample gets its own transform
    big = batch(64, 1, 28, 28)
    kept = (random_affine(big, generator=torch.Generator().manual_seed(0)) > 0).float().mean()
    assert 0.75 < kept / (big > 0).float().mean() < 1.01  # content mostly kept, some zero fill


def test_crop_flip_content():
    x = torch.arange(2 * 3 * 5 * 5, dtype=torch.float32).view(2, 3, 5, 5) + 1
    g = torch.Generator().manual_seed(0)
    y = random_crop_flip(x, size=5, padding=2, generator=g)
    assert y.shape == (2, 3, 5, 5)
    padded = torch.nn.functional.pad(x, (2, 2, 2, 2))
    for b in range(2):  # each output is some window of the padded image, maybe mirrored
        windows = [padded[b, :, i:i + 5, j:j + 5] for i in range(5) for j in range(5)]
        windows += [w.flip(-1) for w in windows]
        assert any(torch.equal(y[b], w) for w in windows)
    assert torch.equal(random_crop_flip(x, 5, 0, flip_p=0.0), x)
    assert torch.equal(random_crop_flip(x, 5, 0, flip_p=1.0), x.flip(-1))


def test_crop_flip_statistics_and_determinism():
    x = batch(400, 3, 32, 32)
    g = torch.Generator().manual_seed(5)
    y = random_crop_flip(x, generator=g)
    assert y.shape == x.shape and y.dtype == torch.uint8
    assert torch.equal(y, random_crop_flip(x, generator=torch.Generator().manual_seed(5)))
    flipped = sum(torch.equal(y[i], x[i].flip(-1)) for i in range(400))
    unchanged = sum(torch.equal(y[i], x[i]) for i in range(400))
    # offset (4, 4) has probability 1/81; flip splits it in half
    assert flipped + unchanged < 30
    with pytest.raises(ValueError, match="larger than padded"):
        random_crop_flip(x, size=41, padding=4)


def test_augment_for_registry():
    assert augment_for(get_dataset("fashion-mnist")) is identity
    x = batch(4, 3, 32, 32)
    assert augment_for(get_dataset("cifar10"))(x, generator=torch.Generator().manual_seed(0)).shape == (4, 3, 32, 32)
    mnist = augment_for(get_dataset("mnist"))
    assert mnist(batch(), generator=torch.Generator().manual_seed(0)).shape == (6, 1, 28, 28)
    with pytest.raises(ValueError, match="unknown dataset .svhn."):
        augment_for(get_dataset("svhn"))
