"""Batch transforms for static images: pure functions on whole ``[B, C, H, W]`` tensors.

No per-sample Python loop: per-sample random parameters are drawn as tensors and applied in one
vectorised call, on whatever device ``x`` lives.  Every draw goes through the optional
``torch.Generator`` (drawn on the generator's device, then moved to the data's), so a seeded
generator gives the same batch.  Augmentations keep dtype and scale (uint8 stays uint8, the
zero fill is black), so they run *before* :func:`normalize`, as torchvision's PIL transforms run
before ``Normalize`` in the authors' pipeline.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from ..catalog import DatasetSpec, as_dataset

__all__ = ["normalize", "affine_theta", "apply_affine", "random_affine", "random_crop_flip", "identity",
           "augment_for"]


def _uniform(n: int, low: float, high: float, generator: torch.Generator | None, device) -> torch.Tensor:
    """``n`` float64 draws from U[low, high), made on the generator's device then moved."""
    gdev = generator.device if generator is not None else device
    u = torch.rand(n, generator=generator, device=gdev, dtype=torch.float64)
    return (low + (high - low) * u).to(device)


def normalize(x: torch.Tensor, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    """``x [B, C, H, W]`` on the 0..255 pixel scale (uint8, or float after augmentation) ->
    float32 ``(x / 255 - mean) / std`` with per-channel ``mean`` / ``std``."""
    if x.dim() != 4:
        raise ValueError(f"normalize expects [B, C, H, W], got shape {tuple(x.shape)}")
    if len(mean) not in (1, x.shape[1]) or len(std) != len(mean):
        raise ValueError(f"mean/std of length {len(mean)}/{len(std)} do not fit {x.shape[1]} channels")
    m = torch.tensor(mean, dtype=torch.float32, device=x.device).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32, device=x.device).view(1, -1, 1, 1)
    return (x.float() / 255.0 - m) / s


def affine_theta(angle_deg: torch.Tensor, tx: torch.Tensor, ty: torch.Tensor, scale: torch.Tensor,
                 size: tuple[int, int]) -> torch.Tensor:
    """Sampling matrices ``[B, 2, 3]`` for ``F.affine_grid(..., align_corners=False)``.

    Forward map, in pixels about the image centre with y pointing down:
    ``p_out = scale * R(angle) p_in + (tx, ty)``; a positive angle turns the picture
    counter-clockwise on screen (as torchvision).  ``affine_grid`` wants the inverse map, from
    output to input, in normalised coordinates ``u = p / (W/2, H/2)``: ``D^-1 A^-1 D`` and shift
    ``-D^-1 A^-1 t``, which keeps a rotation a rotation on non-square images.
    """
    H, W = size
    a = torch.deg2rad(angle_deg.double())
    cos, sin = torch.cos(a), torch.sin(a)
    inv = torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], -2) / scale.double()[:, None, None]
    D = torch.tensor([W / 2.0, H / 2.0], dtype=torch.float64, device=inv.device)
    lin = inv * D[None, None, :] / D[None, :, None]
    t = torch.stack([tx.double(), ty.double()], -1)
    shift = -(inv @ t[:, :, None])[:, :, 0] / D
    return torch.cat([lin, shift[:, :, None]], -1)


def apply_affine(x: torch.Tensor, theta: torch.Tensor, mode: str = "nearest") -> torch.Tensor:
    """Resample ``x [B, C, H, W]`` with sampling matrices ``theta [B, 2, 3]``; outside is 0.

    ``nearest`` (torchvision RandomAffine's default) keeps uint8 values exact; ``bilinear``
    interpolates and, for integer input, rounds back.  Output dtype = input dtype.
    """
    if mode not in ("nearest", "bilinear"):
        raise ValueError(f"mode must be 'nearest' or 'bilinear', got {mode!r}")
    xf = x.float()
    grid = F.affine_grid(theta.to(xf.dtype), list(xf.shape), align_corners=False)
    y = F.grid_sample(xf, grid, mode=mode, padding_mode="zeros", align_corners=False)
    if x.dtype.is_floating_point:
        return y.to(x.dtype)
    info = torch.iinfo(x.dtype)
    return y.round_().clamp_(info.min, info.max).to(x.dtype)


def random_affine(x: torch.Tensor, degrees: float = 30.0, translate: float = 0.15,
                  scale: tuple[float, float] = (0.85, 1.11), generator: torch.Generator | None = None,
                  mode: str = "nearest") -> torch.Tensor:
    """torchvision ``RandomAffine(degrees, translate=(t, t), scale)`` on a batch ``[B, C, H, W]``.

    Per sample: angle ~ U[-degrees, degrees], shift = round(U[-t W, t W]) whole pixels in x (H in
    y) as torchvision, scale ~ U[scale]; zero fill; ``mode`` as :func:`apply_affine`.
    """
    if x.dim() != 4:
        raise ValueError(f"random_affine expects [B, C, H, W], got shape {tuple(x.shape)}")
    B, _, H, W = x.shape
    angle = _uniform(B, -degrees, degrees, generator, x.device)
    tx = torch.round(_uniform(B, -translate * W, translate * W, generator, x.device))
    ty = torch.round(_uniform(B, -translate * H, translate * H, generator, x.device))
    s = _uniform(B, scale[0], scale[1], generator, x.device)
    return apply_affine(x, affine_theta(angle, tx, ty, s, (H, W)), mode=mode)


def random_crop_flip(x: torch.Tensor, size: int = 32, padding: int = 4,
                     generator: torch.Generator | None = None, flip_p: float = 0.5) -> torch.Tensor:
    """Zero-pad ``x [B, C, H, W]`` by ``padding``, crop a random ``size x size`` window per sample
    and mirror it left-right with probability ``flip_p``; returns ``[B, C, size, size]``, dtype kept.

    Crop and flip are one gather: the flip only reverses the window's column index.
    """
    if x.dim() != 4:
        raise ValueError(f"random_crop_flip expects [B, C, H, W], got shape {tuple(x.shape)}")
    B, C, H, W = x.shape
    Hp, Wp = H + 2 * padding, W + 2 * padding
    if size > Hp or size > Wp:
        raise ValueError(f"crop {size} larger than padded image {Hp}x{Wp}")
    xp = F.pad(x, (padding, padding, padding, padding)) if padding else x
    top = _uniform(B, 0, 1, generator, x.device).mul(Hp - size + 1).floor().long().clamp_(max=Hp - size)
    left = _uniform(B, 0, 1, generator, x.device).mul(Wp - size + 1).floor().long().clamp_(max=Wp - size)
    flip = _uniform(B, 0, 1, generator, x.device) < flip_p
    r = torch.arange(size, device=x.device)
    rows = top[:, None] + r  # [B, size]
    cols = left[:, None] + torch.where(flip[:, None], size - 1 - r, r)  # [B, size]
    b = torch.arange(B, device=x.device)[:, None, None, None]
    c = torch.arange(C, device=x.device)[None, :, None, None]
    return xp[b, c, rows[:, None, :, None], cols[:, None, None, :]]


def identity(x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """No augmentation (Fashion-MNIST, evaluation)."""
    return x


# DatasetSpec.augment -> the augmentation (the catalog record of each dataset names its own)
AUGMENTATIONS: dict[str, Callable[..., torch.Tensor]] = {
    "affine": random_affine,  # defaults are the paper's: 30 deg, translate 0.15, scale 0.85..1.11
    "crop_flip": random_crop_flip,  # defaults: crop 32, pad 4, flip p=0.5
    "none": identity,
}


def augment_for(spec: DatasetSpec | str) -> Callable[..., torch.Tensor]:
    """The training augmentation of a dataset (its record ``spec``, or its name; the supplement's Preprocessing
    section) as ``f(x, generator=None) -> x``, applied to raw pixel batches ``x [B, C, H, W]`` before
    :func:`normalize`: MNIST affine, CIFAR-10 crop + flip, Fashion-MNIST none (``augment`` of its catalog record)."""
    return AUGMENTATIONS[as_dataset(spec).augment]
