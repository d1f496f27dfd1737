"""Test-set batches for deployment statistics, loaded through ``plif.data`` or made up.

Statistics only need an iterable of ``(x, labels)``; these helpers build one from a run config
(dataset name, T) so the CLI can pass it in, and tests can pass anything else instead.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import torch

__all__ = ["eval_batches", "random_batches"]


def _batched(x: torch.Tensor, y: torch.Tensor, batch_size: int, time_major: bool) -> Iterator:
    for i in range(0, x.shape[0], batch_size):
        xb = x[i:i + batch_size]
        yield (xb.transpose(0, 1).float() if time_major else xb), y[i:i + batch_size]


def eval_batches(config: dict, data_dir: str | Path | None, samples: int | None = None,
                 batch_size: int = 64) -> Iterator:
    """Batches of the test split of ``config["dataset"]``: static images normalised per SPEC §3
    as ``[B, C, H, W]``, event datasets as frames ``[T, B, 2, H, W]``."""
    name = config.get("dataset")
    if not name:
        raise ValueError("the run config names no 'dataset'; pass --random to use random input")
    from ..data import static

    if name in static.STATIC_DATASETS:
        from ..data.transforms import normalize

        entry = static.STATIC_DATASETS[name]
        images, labels = static.load_static(name, data_dir, train=False)
        if samples is not None:
            images, labels = images[:samples], labels[:samples]
        return _batched(normalize(images, entry.mean, entry.std), labels, batch_size, time_major=False)
    try:
        from ..data.events import load_event_frames
    except ImportError:
        raise ValueError(f"dataset {name!r}: event-data loading (plif.data.events) is not available") from None
    frames, labels = load_event_frames(name, data_dir, int(config["T"]), train=False)
    if samples is not None:
        frames, labels = frames[:samples], labels[:samples]
    return _batched(frames, labels, batch_size, time_major=True)


def random_batches(input_shape: tuple, samples: int, batch_size: int = 64, seed: int = 0) -> Iterator:
    """Standard-normal static inputs ``[B, *input_shape]`` without labels (for smoke runs and tests)."""
    g = torch.Generator().manual_seed(seed)
    for i in range(0, samples, batch_size):
        yield torch.randn(min(batch_size, samples - i), *input_shape, generator=g)
