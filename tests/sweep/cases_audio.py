"""SHD / SSC's HDF5 spike files given to ``plif data prepare`` as a user would: files in the published
layout (written with h5py), damaged or with bad content: a label out of range, a unit beyond the 700
channels, times going backwards or not finite, times and units of unequal length, a missing field, a
missing split, a file that is still gzipped, truncated or junk, the train file copied as the test file.
Each must be refused in one line naming the file and the field, with no finished cache left behind."""
from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np

from .case import Case, SkipCase

AREA = "audio"
_PREP = ["data", "prepare", "shd", "--root", "{tmp}/shd", "--T", "4", "--cache-dir", "{tmp}/cache", "--workers", "0",
         "--quiet"]


def _write(path: Path, times, units, labels, skip=()) -> None:
    """A spike file in the published layout: spikes/times, spikes/units (variable-length), labels."""
    try:
        import h5py
    except ImportError:
        raise SkipCase("h5py is not installed") from None
    with h5py.File(path, "w") as f:
        for name, rows, dt in (("spikes/times", times, "float32"), ("spikes/units", units, "uint16")):
            if name not in skip:
                d = f.create_dataset(name, (len(rows),), dtype=h5py.vlen_dtype(np.dtype(dt)))
                for i, r in enumerate(rows):
                    d[i] = np.asarray(r, dtype=dt)
        if "labels" not in skip:
            f.create_dataset("labels", data=np.asarray(labels, dtype=np.uint16))


def _samples(n: int, seed: int):
    rng = np.random.default_rng(seed)
    times = [np.sort(rng.random(int(rng.integers(8, 40)))) for _ in range(n)]
    return times, [rng.integers(0, 700, len(t)) for t in times], rng.integers(0, 20, n)


def _shd(edit=None, skip=()):
    """setup: ``{tmp}/shd`` with a train file of 6 samples and a test file of 3, the train file's
    ``(times, units, labels)`` changed by ``edit`` (in place) first."""
    def setup(tmp):
        root = tmp / "shd"
        root.mkdir()
        times, units, labels = _samples(6, 0)
        if edit is not None:
            edit(times, units, labels)
        _write(root / "shd_train.h5", times, units, labels, skip)
        _write(root / "shd_test.h5", *_samples(3, 1))
    return setup


def _then_file(change):
    """setup: the good files, then ``change(root)`` on the folder."""
    def setup(tmp):
        _shd()(tmp)
        change(tmp / "shd")
    return setup


def _set(i, times=None, units=None):
    def edit(t, u, labels):
        if times is not None:
            t[i] = np.asarray(times)
        if units is not None:
            u[i] = np.asarray(units)
    return edit


def no_cache(tmp: Path, r) -> str | None:
    """check: a refusal names the split's file and leaves no half-written cache: a folder holds a finished
    cache that checks whole (the other split's, built before the refused one) or no frames at all."""
    from plif.data.events.cache import CacheError, check_cache

    for folder in (tmp / "cache").iterdir() if (tmp / "cache").is_dir() else ():
        if (folder / "meta.json").exists():
            try:
                check_cache(folder, deep=True)
            except CacheError as e:
                return f"a refused build left a broken cache: {e}"
        elif (folder / "frames.npy").exists():
            return f"a refused build left {folder / 'frames.npy'} without its meta.json"
    if r.returncode not in (0, None) and ".h5" not in r.stderr:
        return "the refusal does not name the spike file"
    return None


def _rewrite(name: str, fn):
    return lambda root: (root / name).write_bytes(fn((root / name).read_bytes()))


BAD = {  # name -> setup
    "label-out-of-range": _shd(lambda t, u, labels: labels.__setitem__(2, 20)),
    "unit-700": _shd(lambda t, u, labels: u[1].__setitem__(0, 700)),
    "times-backwards": _shd(_set(3, times=[0.1, 0.3, 0.2], units=[1, 2, 3])),
    "time-nan": _shd(_set(0, times=[0.1, float("nan")], units=[4, 5])),
    "time-negative": _shd(_set(0, times=[-1.0, 0.5], units=[4, 5])),
    "unequal-lengths": _shd(_set(4, times=[0.1, 0.2, 0.3], units=[1, 2])),
    "silent-sample": _shd(_set(5, times=[], units=[])),
    "missing-labels": _shd(skip=("labels",)),
    "missing-units": _shd(skip=("spikes/units",)),
    "missing-test-split": _then_file(lambda root: (root / "shd_test.h5").unlink()),
    "still-gzipped": _then_file(_rewrite("shd_train.h5", gzip.compress)),
    "truncated": _then_file(_rewrite("shd_test.h5", lambda b: b[:len(b) // 2])),
    "junk": _then_file(_rewrite("shd_train.h5", lambda b: os.urandom(len(b)))),
    "empty-file": _then_file(_rewrite("shd_train.h5", lambda b: b"")),
    "test-is-a-copy-of-train": _then_file(lambda root: (root / "shd_test.h5").write_bytes(
        (root / "shd_train.h5").read_bytes())),
}

CASES: list[Case] = [Case(f"shd-{name}", AREA, _PREP, setup=setup, check=no_cache, timeout=120)
                     for name, setup in BAD.items()]
CASES.append(Case("shd-good", AREA, _PREP, expect="ok", setup=_shd(), timeout=120))
