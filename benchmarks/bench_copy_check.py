"""What the copy check across splits costs a training start on an N-MNIST-sized tree: the first start
(the lists compared: a stat per file, then the first 4 KiB of every file whose size the other split
has) and a later one (the verdict kept in the cache folder: a stat per file).

    .venv/bin/python benchmarks/bench_copy_check.py [--train 60000] [--test 10000] [--repeat 3]

Writes ``--train`` + ``--test`` files of random bytes, 15-25 kB each (sizes colliding as in N-MNIST),
as ``Train/<digit>/<k>.bin`` and ``Test/<digit>/<k>.bin`` in a temporary folder, then times
plif's check (``plif.data.events.load._refuse_copies``) for the train split, best of ``--repeat``:
from a warm page cache, and "cold" after ``posix_fadvise(DONTNEED)`` on every file (this machine's
page cache only: a host below a virtual machine may still hold the pages).  Listing the other split
is part of the check and is timed with it.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from plif.catalog import get_dataset
from plif.data.events import load
from plif.data.events.datasets import list_samples


def write_tree(root: Path, split: str, n: int, seed: int) -> list[Path]:
    files = []
    for k in range(n):
        p = root / split / str(k % 10) / f"{k:05d}.bin"
        p.parent.mkdir(parents=True, exist_ok=True)
        size = 5 * (3000 + ((k + seed) * 7919) % 2000)
        p.write_bytes(os.urandom(size))
        files.append(p)
    return files


def evict(files) -> None:
    for p in files:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def check(root: Path, samples, folder: Path, kept: bool, cold: bool, files) -> float:
    load._COMPARED.clear()  # a fresh process
    if not kept:
        (folder / load.NO_COPIES).unlink(missing_ok=True)
    if cold:
        evict(files)
    t = time.perf_counter()
    unseen = load._refuse_copies(get_dataset("nmnist"), root, True, samples, {}, folder)
    took = time.perf_counter() - t
    if unseen:  # what prepare_event_frames keeps once the cache is built
        folder.mkdir(parents=True, exist_ok=True)
        (folder / load.NO_COPIES).write_text(unseen + "\n")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", type=int, default=60000)
    ap.add_argument("--test", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "nm"
        t = time.perf_counter()
        files = write_tree(root, "Train", a.train, 0) + write_tree(root, "Test", a.test, 1)
        print(f"wrote {len(files)} files in {time.perf_counter() - t:.0f} s")
        t = time.perf_counter()
        samples = list_samples(get_dataset("nmnist"), root, True)
        took = time.perf_counter() - t
        print(f"listing the train split ({len(samples)} files, done by every start anyway): {took:.2f} s")
        folder = Path(tmp) / "cache" / "split"
        for cold in (False, True):
            for kept in (False, True):
                best = min(check(root, samples, folder, kept, cold, files) for _ in range(a.repeat))
                start = "later start (verdict kept)" if kept else "first start (compared)"
                print(f"{'cold' if cold else 'warm'} page cache, {start}: {best:.2f} s")


if __name__ == "__main__":
    main()
