"""Pictures of frames ``[T, 2, H, W]``: ON events red, OFF events blue, one panel per slice."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..atomic import atomic_write_bytes

__all__ = ["frames_to_rgb", "save_frames_grid"]


def frames_to_rgb(frames: np.ndarray) -> np.ndarray:
    """``[T, 2, H, W]`` counts -> ``[T, H, W, 3]`` float in [0, 1]: red = ON, blue = OFF.

    One scale for all slices, so panels compare: the 99th percentile of the non-zero counts maps
    to full brightness (a few hot pixels would otherwise leave every other pixel near black).
    """
    f = np.asarray(frames, dtype=np.float64)
    if f.ndim != 4 or f.shape[1] != 2:
        raise ValueError(f"frames must be [T, 2, H, W], got shape {f.shape}")
    nz = f[f > 0]
    if nz.size:
        f = np.clip(f / np.percentile(nz, 99), 0.0, 1.0)
    rgb = np.zeros((f.shape[0], f.shape[2], f.shape[3], 3))
    rgb[..., 0] = f[:, 1]
    rgb[..., 2] = f[:, 0]
    return rgb


def save_frames_grid(frames: np.ndarray, path: str | Path, title: str | None = None, cols: int | None = None) -> Path:
    """Write a PNG grid of the ``T`` slices (matplotlib, Agg backend, no display needed)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rgb = frames_to_rgb(frames)
    T = len(rgb)
    cols = cols or min(T, 10)
    rows = -(-T // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(1.6 * cols, 1.6 * rows + (0.4 if title else 0)), squeeze=False)
    for i, ax in enumerate(axes.flat):
        ax.axis("off")
        if i < T:
            ax.imshow(rgb[i], interpolation="nearest")
            ax.set_title(f"t{i}", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=9)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return atomic_write_bytes(path, buf.getvalue())
