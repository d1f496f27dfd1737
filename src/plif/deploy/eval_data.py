"""Test-set batches for deployment statistics, loaded through ``plif.data`` or made up.

Statistics only need an iterable of ``(x, labels)``; these helpers build one from a run config
(dataset name, T) so the CLI can pass it in, and tests can pass anything else instead.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import torch

__all__ = ["eval_batches", "random_batches"]


def eval_batches(config: dict, data_dir: str | Path | None, samples: int | None = None,
                 batch_size: int = 64) -> Iterator:
    """Batches of the test split of ``config["dataset"]``, prepared as in training: static images
    normalised as the supplement's Preprocessing section says, ``[B, C, H, W]``, event datasets as frames ``[T, B, 2, H, W]``."""
    from ..data.catalog import get_dataset
    from ..data.pipeline import eval_batches as split_batches, load_test_split

    name = config.get("dataset")
    if not name:
        raise ValueError("the run config names no 'dataset'; pass --random to use random input")
    split, prepare = load_test_split(get_dataset(name), data_dir, int(config["T"]), samples)
    return split_batches(split, prepare, batch_size)


def random_batches(input_shape: tuple, samples: int, batch_size: int = 64, seed: int = 0) -> Iterator:
    """Standard-normal static inputs ``[B, *input_shape]`` without labels (for smoke runs and tests)."""
    g = torch.Generator().manual_seed(seed)
    for i in range(0, samples, batch_size):
        yield torch.randn(min(batch_size, samples - i), *input_shape, generator=g)
