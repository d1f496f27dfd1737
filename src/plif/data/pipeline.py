"""Datasets for training: resident on the device, or streamed from the CPU / a memory-mapped cache.

Static images stay uint8 ``[N, C, H, W]`` and are augmented and normalised per batch on the
device; event datasets are ``[N, T, 2, H, W]`` frames, moved to ``[T, B, ...]`` per batch.

``data_on_device`` (``--data-on-device``): ``yes`` copies whole splits to the device as before;
``no`` streams every batch (reader threads gather the rows from host memory or the memory-mapped
frame cache into reused pinned buffers; copies to the device are non-blocking); ``auto`` keeps the
splits resident when they take at most half of the device's free memory and streams otherwise
(CIFAR10-DVS at T = 20 is ~6.5 GB of uint8).  Both paths draw the same permutation and run the
same augmentation on the device with the same generator, so the same seed gives the same batches.
The order of an epoch depends only on ``(seed, epoch)``, so a resumed run sees the same batches.
"""
from __future__ import annotations

import concurrent.futures as cf
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator

import numpy as np
import torch

from ..device import free_memory
from ..catalog import DatasetSpec, as_dataset

__all__ = ["Split", "TrainData", "DataOptions", "DataSource", "LoadOptions", "data_source", "eval_batches", "load_test_split",
           "load_train_data", "cap_and_split", "planned_train_samples", "epoch_generator", "fits_on_device",
           "free_memory", "LOADER_WORKERS"]

LOADER_WORKERS = 2  # threads gathering streamed batches (benchmarks/bench_streaming.py: 1-2 are best here)
RESIDENT_FRACTION = 0.5  # auto: resident when the splits need at most this share of free memory


@dataclass(frozen=True)
class DataOptions:
    """What a run asks of the data layer: the dataset's record (resolved once, where the run starts),
    its folder, T, and how the splits are cut (:func:`cap_and_split`) and placed (``on_device``:
    ``--data-on-device``).  ``plif.train.TrainConfig.data_options`` makes it from a run's config."""

    spec: DatasetSpec
    data_dir: str | None = None  # None: the default folder (plif.catalog.default_root)
    T: int = 1  # event datasets: the frames per sample
    seed: int = 0  # the validation split's draw
    val_split: float = 0.0
    max_train_samples: int | None = None
    max_val_samples: int | None = None
    max_test_samples: int | None = None
    on_device: str = "auto"


@dataclass
class Split:
    """One split: labels ``y`` ``[n]`` and its samples, rows ``rows`` of ``x`` (all rows of
    ``x`` when ``rows`` is None); ``x`` is ``[N, C, H, W]`` uint8 images or ``[N, T, 2, H, W]`` event frames.  Resident: ``x`` is on the training device.  Streamed: ``x``
    stays on the CPU (host memory, or the memory-mapped frame cache) and batches go to ``device``."""

    x: torch.Tensor
    y: torch.Tensor
    rows: torch.Tensor | None = None
    device: torch.device | None = None  # set for streamed splits
    origin: str | None = None  # where the samples were read from (an event dataset's frame cache), for messages

    def __len__(self) -> int:
        return int(self.y.shape[0])

    @property
    def streamed(self) -> bool:
        return self.device is not None

    @property
    def nbytes(self) -> int:
        return len(self) * self.x[0].numel() * self.x.element_size() if len(self.x) else 0

    def gather(self, idx: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """Samples ``idx`` (positions in this split) as one CPU tensor ``[len(idx), ...]``, written
        into ``out`` (a reusable buffer of at least ``len(idx)`` rows) when given.  ``index_select``
        releases the GIL, so reader threads gather in parallel."""
        r = idx if self.rows is None else self.rows[idx]
        out = torch.empty((len(r), *self.x.shape[1:]), dtype=self.x.dtype) if out is None else out[:len(r)]
        return torch.index_select(self.x, 0, r, out=out)

    def to_device(self, device) -> "Split":
        """The resident copy: every sample of the split on ``device``."""
        x = self.x if self.rows is None and len(self.x) == len(self) else self.gather(torch.arange(len(self)))
        return Split(x.to(device), self.y.to(device))

    def streaming(self, device) -> "Split":
        """This split streamed: ``x`` stays where it is, batches go to ``device``."""
        return replace(self, device=torch.device(device))

    def limit(self, n: int | None) -> "Split":
        """At most ``n`` samples: a fixed-seed class-stratified subset (the same one in every run)."""
        from ..data.split import stratified_subset

        return self if n is None or n >= len(self) else self.subset(stratified_subset(self.y.cpu(), n, seed=0))

    def subset(self, idx: torch.Tensor) -> "Split":
        """The samples at positions ``idx [n]`` of this split (no copy of ``x``)."""
        return replace(self, y=self.y[idx], rows=idx if self.rows is None else self.rows[idx])


def _stream(split: Split, batches: list[torch.Tensor], workers: int | None = None, reuse: bool = False):
    """``(x, y)`` of each batch on ``split.device``, in order.

    ``workers`` reader threads gather upcoming batches (``index_select`` from host memory or the
    memory-mapped frame cache, which releases the GIL) into a ring of reused buffers,
    pinned for CUDA, from which batches are copied to the device without blocking.  Threads, not
    a DataLoader's worker processes: handing a 10 MB batch from a worker process to the trainer
    through shared memory capped the rate at ~900 samples/s here, threads reach several thousand
    (benchmarks/bench_streaming.py).  On a CPU device each batch is a copy that the caller may
    keep, unless ``reuse``: then it is the buffer itself, valid until the next batch is drawn.
    """
    if not batches:
        return
    workers = max(1, LOADER_WORKERS if workers is None else workers)
    depth = min(2 * workers, len(batches))  # batches in flight
    cuda = split.device.type == "cuda"
    size = max(len(b) for b in batches)
    ring = [torch.empty((size, *split.x.shape[1:]), dtype=split.x.dtype, pin_memory=cuda) for _ in range(depth + 1)]
    copied: list = [None] * (depth + 1)  # CUDA event of the last copy out of each buffer
    pool = cf.ThreadPoolExecutor(workers, thread_name_prefix="plif-stream")
    try:
        futures = [pool.submit(split.gather, batches[i], ring[i]) for i in range(depth)]
        for i in range(len(batches)):
            x = futures[i].result()
            y = split.y[batches[i]].to(split.device, non_blocking=cuda)
            slot = i % (depth + 1)
            if cuda:
                x = x.to(split.device, non_blocking=True)
                copied[slot] = torch.cuda.Event()
                copied[slot].record()
            elif not reuse:
                x = x.clone()
            nxt = i + depth
            if nxt < len(batches):
                free = nxt % (depth + 1)  # the buffer of batch i - 1, whose copy was issued already
                if copied[free] is not None:
                    copied[free].synchronize()
                futures.append(pool.submit(split.gather, batches[nxt], ring[free]))
            yield x, y
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@dataclass
class TrainData:
    """Train / validation / test splits plus how to turn a raw batch into network input.

    ``prepare(x, gen)`` makes a batch of :class:`Split` rows network input: normalised float
    ``[B, C, H, W]`` images or float ``[T, B, 2, H, W]`` frames; ``augment`` is the training augmentation.
    """

    train: Split
    val: Split | None
    test: Split
    prepare: Callable[[torch.Tensor, torch.Generator | None], torch.Tensor]
    augment: Callable[[torch.Tensor, torch.Generator | None], torch.Tensor]
    workers: int | None = None  # streamed splits: reader threads (None: LOADER_WORKERS)

    def train_batches(self, batch_size: int, gen: torch.Generator, rank: int = 0, world: int = 1
                      ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Shuffled, augmented training batches of exactly ``batch_size`` (the remainder is
        dropped so every step has the same shape); with ``world > 1`` each rank takes its shard.
        A streamed batch is valid until the next one is drawn (its buffer is reused)."""
        n = len(self.train)
        perm = torch.randperm(n, generator=gen)
        per_rank = n // world
        perm = perm[rank * per_rank:(rank + 1) * per_rank]
        starts = range(0, per_rank - batch_size + 1, batch_size)
        if self.train.streamed:
            raw = _stream(self.train, [perm[i:i + batch_size] for i in starts], self.workers, reuse=True)
        else:
            perm = perm.to(self.train.y.device)
            raw = ((self.train.x[perm[i:i + batch_size]], self.train.y[perm[i:i + batch_size]]) for i in starts)
        for x, y in raw:
            yield self.prepare(self.augment(x, gen)), y

    def eval_batches(self, split: Split, batch_size: int, rank: int = 0, world: int = 1):
        """Every sample of ``split`` once, in order, sharded across ranks."""
        return eval_batches(split, self.prepare, batch_size, rank, world, self.workers)

    def steps_per_epoch(self, batch_size: int, world: int = 1) -> int:
        """Full batches per epoch on each of ``world`` ranks (the remainder is dropped)."""
        return (len(self.train) // world) // batch_size


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    """The CPU generator for shuffling and augmentation in ``epoch``; independent of history."""
    return torch.Generator().manual_seed(seed * 1_000_003 + epoch)


@dataclass(frozen=True)
class LoadOptions:
    """How a dataset is read beyond what a run's configuration says: training takes these defaults,
    ``plif data prepare`` sets them from its flags.  Each option applies to one kind of dataset and
    is ignored by the other."""

    download: bool = True  # static: fetch missing files (md5-checked)
    slicing: str | None = None  # event: how a recording's events are cut into the T frames ("count" / "time"; None: the record's)
    cache_dir: str | None = None  # event: where frame caches go [default_root()/frames]
    workers: int | None = None  # event: processes building a cache (0: none) [all CPUs]
    progress: bool = True  # event: a progress bar while a cache is built
    allow_empty: bool = False  # event: keep recordings without events as all-zero samples
    verify: bool = False  # event: hash every recording and the frames before a cache is reused
    hash_sources: bool = False  # event: hash every recording before a cache is reused (plif data prepare)
    reader: dict = field(default_factory=dict)  # event: reader options of the record (e.g. flip_x)


@dataclass(frozen=True)
class DataSource:
    """How to read one dataset's splits and turn raw batches into network input."""

    load: Callable[[bool], Split]  # train? -> the whole split on the CPU
    prepare: Callable[[torch.Tensor, torch.Generator | None], torch.Tensor]
    augment: Callable[[torch.Tensor, torch.Generator | None], torch.Tensor]


def data_source(info: DatasetSpec | str, data_dir, T: int, options: LoadOptions = LoadOptions()) -> DataSource:
    """How to read the dataset whose record (or name) is ``info``.  Static images: uint8 in, augmented then
    normalised per batch (the supplement's Preprocessing).  Event datasets:
    frames ``[N, T, 2, H, W]`` (the memory-mapped cache) in, ``[T, B, 2, H, W]`` float per batch.
    ``data_dir=None``: the default folder (``$PLIF_DATA_ROOT``, and ``$PLIF_DATA_ROOT/<dataset>`` for event data)."""
    info = as_dataset(info)
    if not info.is_event:
        from .static import load_static
        from .transforms import augment_for, normalize

        augment_fn = augment_for(info)

        def load(train):
            return Split(*load_static(info, data_dir, train=train, download=options.download))

        def prepare(x, gen=None):
            return normalize(x, info.mean, info.std)

        def augment(x, gen=None):
            return augment_fn(x, generator=gen)
    else:
        from .events.cache import load_cached
        from .events.load import prepare_event_frames

        def load(train):
            o = options
            folder = prepare_event_frames(info, data_dir, T, train, o.slicing or info.slicing, o.cache_dir, o.workers, o.progress,
                                          o.allow_empty, verify=o.verify, hash_sources=o.hash_sources, **o.reader)
            frames, labels = load_cached(folder, check=False)  # checked by prepare_event_frames
            return Split(torch.from_numpy(frames), torch.from_numpy(np.asarray(labels, dtype=np.int64)),
                         origin=str(folder))

        def prepare(x, gen=None):
            return x.float().transpose(0, 1)  # [B, T, ...] -> [T, B, ...]

        def augment(x, gen=None):
            return x
    return DataSource(load, prepare, augment)


def eval_batches(split: Split, prepare, batch_size: int, rank: int = 0, world: int = 1, workers: int | None = None):
    """Every sample of ``split`` once, in order, prepared, sharded across ranks."""
    n = len(split)
    lo, hi = n * rank // world, n * (rank + 1) // world
    if split.streamed:
        idx = [torch.arange(i, min(i + batch_size, hi)) for i in range(lo, hi, batch_size)]
        for x, y in _stream(split, idx, workers, reuse=True):
            yield prepare(x, None), y
        return
    for i in range(lo, hi, batch_size):
        j = min(i + batch_size, hi)
        yield prepare(split.x[i:j], None), split.y[i:j]


def fits_on_device(nbytes: int, free: int) -> bool:
    """``auto``: resident when the splits take at most :data:`RESIDENT_FRACTION` of free memory
    (the rest is for the network's activations)."""
    return nbytes <= RESIDENT_FRACTION * free


def _place(splits: list[Split | None], mode: str, device: torch.device) -> list[Split | None]:
    if mode not in ("auto", "yes", "no"):
        raise ValueError(f"--data-on-device must be auto, yes or no, got {mode!r}")
    if mode == "auto":
        need = sum(s.nbytes for s in splits if s is not None)
        mode = "yes" if fits_on_device(need, free_memory(device)) else "no"
    if mode == "yes":
        return [None if s is None else s.to_device(device) for s in splits]
    return [None if s is None else s.streaming(device) for s in splits]


def load_test_split(info: DatasetSpec | str, data_dir, T: int, limit: int | None = None, device="cpu",
                    on_device: str = "yes"):
    """Only the test split of the dataset whose record (or name) is ``info`` (no training data read):
    ``(Split, prepare)``."""
    src = data_source(info, data_dir, T)
    (split,) = _place([src.load(False).limit(limit)], on_device, torch.device(device))
    return split, src.prepare


def cap_and_split(train: Split, cfg: DataOptions) -> tuple[Split, Split | None]:
    """``--max-train-samples`` caps the training pool first; ``--val-split`` then holds out that
    fraction of each class of the capped pool (so 3072 and 0.15 give 2612 train + 460 validation,
    not 9000 validation samples), and ``--max-val-samples`` caps what was held out."""
    from .split import stratified_split

    train = train.limit(cfg.max_train_samples)
    if cfg.val_split <= 0:
        return train, None
    tr_idx, va_idx = stratified_split(train.y, cfg.val_split, seed=cfg.seed)
    return train.subset(torch.as_tensor(tr_idx)), train.subset(torch.as_tensor(va_idx)).limit(cfg.max_val_samples)


def planned_train_samples(cfg: DataOptions) -> int | None:
    """The training samples :func:`load_train_data` will keep, from the file list alone (event
    datasets, before any frame cache is built); ``None`` for static datasets (loaded quickly anyway)."""
    info = cfg.spec
    if not info.is_event:
        return None
    from ..catalog import default_root
    from .events.datasets import list_samples

    root = cfg.data_dir if cfg.data_dir is not None else default_root() / info.name
    labels = torch.tensor([s.label for s in list_samples(info, root, train=True)], dtype=torch.long)
    train, _ = cap_and_split(Split(labels, labels), cfg)  # the labels stand in for the frames
    return len(train)


def load_train_data(cfg: DataOptions, device: torch.device) -> TrainData:
    """Load the dataset of ``cfg`` for ``device`` (resident or streamed, see the module
    docstring), with the validation split of protocol B (:func:`cap_and_split`)."""
    src = data_source(cfg.spec, cfg.data_dir, cfg.T)
    train, test = src.load(True), src.load(False)
    train, val = cap_and_split(train, cfg)
    test = test.limit(cfg.max_test_samples)  # --max-test-samples caps only the test split
    train, val, test = _place([train, val, test], cfg.on_device, device)
    return TrainData(train, val, test, src.prepare, src.augment)
