"""Datasets as tensors on the training device, and deterministic batching over them.

Static images stay uint8 ``[N, C, H, W]`` on the device and are augmented and normalised per
batch there; event datasets are ``[N, T, 2, H, W]`` frames, moved to ``[T, B, ...]`` per batch.
The order of an epoch depends only on ``(seed, epoch)``, so a resumed run sees the same batches.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import torch

from .config import STATIC, TrainConfig

__all__ = ["Split", "TrainData", "DataSource", "data_source", "eval_batches", "load_test_split",
           "load_train_data", "epoch_generator"]


@dataclass
class Split:
    """One split on the device: ``x`` (uint8 images or float frames) and ``y`` int64 labels."""

    x: torch.Tensor
    y: torch.Tensor

    def __len__(self) -> int:
        return int(self.y.shape[0])


@dataclass
class TrainData:
    """Train / validation / test splits plus how to turn a raw batch into network input."""

    train: Split
    val: Split | None
    test: Split
    prepare: Callable[[torch.Tensor, torch.Generator | None], torch.Tensor]
    augment: Callable[[torch.Tensor, torch.Generator | None], torch.Tensor]

    def train_batches(self, batch_size: int, gen: torch.Generator, rank: int = 0, world: int = 1
                      ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Shuffled, augmented training batches of exactly ``batch_size`` (the remainder is
        dropped so every step has the same shape); with ``world > 1`` each rank takes its shard."""
        n = len(self.train)
        perm = torch.randperm(n, generator=gen)
        per_rank = n // world
        perm = perm[rank * per_rank:(rank + 1) * per_rank].to(self.train.y.device)
        for i in range(0, per_rank - batch_size + 1, batch_size):
            idx = perm[i:i + batch_size]
            yield self.prepare(self.augment(self.train.x[idx], gen)), self.train.y[idx]

    def eval_batches(self, split: Split, batch_size: int, rank: int = 0, world: int = 1):
        """Every sample of ``split`` once, in order, sharded across ranks."""
        return eval_batches(split, self.prepare, batch_size, rank, world)

    def steps_per_epoch(self, batch_size: int, world: int = 1) -> int:
        return (len(self.train) // world) // batch_size


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    """The CPU generator for shuffling and augmentation in ``epoch``; independent of history."""
    return torch.Generator().manual_seed(seed * 1_000_003 + epoch)


def _subset(x, y, limit):
    if limit is None or limit >= len(y):
        return x, y
    return x[:limit], y[:limit]


@dataclass(frozen=True)
class DataSource:
    """How to read one dataset's splits and turn raw batches into network input."""

    load: Callable[[bool], tuple[torch.Tensor, torch.Tensor]]  # train? -> (x, y) on the CPU
    prepare: Callable[[torch.Tensor, torch.Generator | None], torch.Tensor]
    augment: Callable[[torch.Tensor, torch.Generator | None], torch.Tensor]


def data_source(dataset: str, data_dir, T: int) -> DataSource:
    """Static images: uint8 in, augmented then normalised per batch (SPEC §3).  Event datasets:
    frames ``[N, T, 2, H, W]`` in, ``[T, B, 2, H, W]`` float per batch."""
    if dataset in STATIC:
        from ..data.static import STATIC_DATASETS, load_static
        from ..data.transforms import augment_for, normalize

        info = STATIC_DATASETS[dataset]
        augment_fn = augment_for(dataset)

        def load(train):
            return load_static(dataset, data_dir, train=train)

        def prepare(x, gen=None):
            return normalize(x, info.mean, info.std)

        def augment(x, gen=None):
            return augment_fn(x, generator=gen)
    else:
        from ..data.events import load_event_frames

        def load(train):
            return load_event_frames(dataset, data_dir, T, train=train)

        def prepare(x, gen=None):
            return x.float().transpose(0, 1)  # [B, T, ...] -> [T, B, ...]

        def augment(x, gen=None):
            return x
    return DataSource(load, prepare, augment)


def eval_batches(split: Split, prepare, batch_size: int, rank: int = 0, world: int = 1):
    """Every sample of ``split`` once, in order, prepared, sharded across ranks."""
    n = len(split)
    lo, hi = n * rank // world, n * (rank + 1) // world
    for i in range(lo, hi, batch_size):
        j = min(i + batch_size, hi)
        yield prepare(split.x[i:j], None), split.y[i:j]


def load_test_split(dataset: str, data_dir, T: int, limit: int | None = None, device="cpu"):
    """Only the test split (no training data read): ``(Split on device, prepare)``."""
    src = data_source(dataset, data_dir, T)
    x, y = _subset(*src.load(False), limit)
    return Split(x.to(device), y.to(device)), src.prepare


def load_train_data(cfg: TrainConfig, device: torch.device) -> TrainData:
    """Load the dataset of ``cfg`` onto ``device``, with the validation split of protocol B."""
    from ..data.split import stratified_split

    src = data_source(cfg.dataset, cfg.data_dir, cfg.T)
    x_train, y_train = src.load(True)
    x_test, y_test = src.load(False)
    val = None
    if cfg.val_split > 0:
        tr_idx, va_idx = stratified_split(y_train, cfg.val_split, seed=cfg.seed)
        val = Split(x_train[va_idx], y_train[va_idx])
        x_train, y_train = x_train[tr_idx], y_train[tr_idx]
    x_train, y_train = _subset(x_train, y_train, cfg.max_train_samples)
    x_test, y_test = _subset(x_test, y_test, cfg.max_test_samples)
    if val is not None:  # --max-test-samples caps only the test split
        val = Split(*_subset(val.x, val.y, cfg.max_val_samples))

    def on(split: Split | None):
        return None if split is None else Split(split.x.to(device), split.y.to(device))

    return TrainData(on(Split(x_train, y_train)), on(val), on(Split(x_test, y_test)), src.prepare, src.augment)
