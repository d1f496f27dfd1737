"""Streaming read rate of CIFAR10-DVS-shaped frames (T = 20, 2 x 128 x 128 uint8) from a warm page cache.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_streaming.py [--samples 1500] [--batch 16] [--repeat 3]

Writes a synthetic frame-cache file ``[N, 20, 2, 128, 128]`` uint8 (about 0.66 MB per sample) to
a temporary folder, reads it once so it is in the page cache, then times one shuffled epoch of
batches through the streamed path of ``--data-on-device no`` (:mod:`plif.data.pipeline`: reader
threads ``index_select`` from the memory map into reused buffers) with 1, 2 and 4 threads; for
comparison, fancy indexing of the memory map in this process, a ``torch.utils.data.DataLoader``
with worker processes, and an in-process DataLoader whose dataset fetches a whole batch with one
``index_select`` (``__getitems__``).  "Reused" is the training path (a batch lives until the next is drawn; on
a GPU it is copied out of the pinned buffer without blocking); "copied" adds the copy that a CPU
caller keeping batches gets.  It checks that the gather returns the right rows and prints the
best of ``--repeat`` epochs in samples/s.  Target: >= 5,000 samples/s, so the loader never limits
a GPU step.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from plif.data.pipeline import Split, _stream


class _Batches(torch.utils.data.Dataset):
    def __init__(self, split, batches):
        self.split, self.batches = split, batches

    def __len__(self):
        return len(self.batches)

    def __getitem__(self, k):
        return self.split.gather(self.batches[k])


class _Rows(torch.utils.data.Dataset):
    """A split as a map-style dataset that fetches a whole batch at once (``__getitems__``)."""

    def __init__(self, split):
        self.split = split

    def __len__(self):
        return len(self.split)

    def __getitem__(self, i):
        return self.split.gather(torch.tensor([i]))[0]

    def __getitems__(self, idx):
        return self.split.gather(torch.as_tensor(idx))


def batch_dataloader(split, batches):
    """A plain in-process DataLoader over the same batches: one ``index_select`` per batch."""
    return torch.utils.data.DataLoader(_Rows(split), batch_sampler=[b.tolist() for b in batches],
                                       collate_fn=lambda x: x, num_workers=0)


def dataloader(split, batches, workers):
    return torch.utils.data.DataLoader(_Batches(split, batches), batch_size=None, num_workers=workers,
                                       prefetch_factor=4, multiprocessing_context="fork")

SHAPE = (20, 2, 128, 128)


def make_cache(folder: Path, n: int) -> tuple[np.memmap, Split]:
    path = folder / "frames.npy"
    arr = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8, shape=(n, *SHAPE))
    rng = np.random.default_rng(0)
    for i in range(0, n, 64):
        k = min(64, n - i)
        arr[i:i + k] = rng.integers(0, 4, (k, *SHAPE), dtype=np.uint8)
    arr.flush()
    del arr
    frames = np.load(path, mmap_mode="r")
    x = torch.from_numpy(np.load(path, mmap_mode="c"))  # as plif.data.events.cache.load_cached maps it
    split = Split(x, torch.zeros(n, dtype=torch.int64))
    with open(path, "rb") as f:  # warm the page cache
        while f.read(1 << 24):
            pass
    return frames, split


def epoch_rate(fn, n: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return n / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(dir=os.environ.get("PLIF_BENCH_TMP")) as tmp:
        frames, split = make_cache(Path(tmp), args.samples)
        n = args.samples - args.samples % args.batch
        perm = torch.randperm(args.samples, generator=torch.Generator().manual_seed(0))[:n]
        batches = list(perm.split(args.batch))
        split = split.streaming("cpu")
        got = split.gather(batches[0][:3])
        assert np.array_equal(got.numpy(), frames[batches[0][:3].numpy()]), "gather returned wrong rows"

        def run(fn):
            def go():
                for b in fn():
                    pass
            return go

        results = {
            "memmap fancy indexing, this process": run(lambda: (frames[b.numpy()] for b in batches)),
            "streamed, 1 reader thread": run(lambda: _stream(split, batches, 1, reuse=True)),
            "streamed, 2 reader threads": run(lambda: _stream(split, batches, 2, reuse=True)),
            "streamed, 4 reader threads": run(lambda: _stream(split, batches, 4, reuse=True)),
            "streamed, 2 threads, each batch copied": run(lambda: _stream(split, batches, 2)),
            "DataLoader, 2 worker processes": run(lambda: dataloader(split, batches, 2)),
            "DataLoader in-process, __getitems__": run(lambda: batch_dataloader(split, batches)),
        }
        print(f"{n} samples of {SHAPE} uint8 ({np.prod(SHAPE) / 1e6:.2f} MB each), batch {args.batch}, "
              f"best of {args.repeat}; torch {torch.__version__}, {os.cpu_count()} CPUs")
        for name, fn in results.items():
            rate = epoch_rate(fn, n, args.repeat)
            print(f"  {name:38s} {rate:8.0f} samples/s  ({rate * np.prod(SHAPE) / 1e9:.2f} GB/s)")


if __name__ == "__main__":
    main()
