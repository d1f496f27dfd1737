"""``load_event_frames``: the one call training makes for an event dataset."""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch

from ...atomic import atomic_write_text
from ...catalog import DatasetSpec, as_dataset, dataset_folder, default_root
from .cache import build_frames_cache, cache_key, load_cached
from .datasets import list_samples
from .fingerprint import same_bytes
from .file import file_to_frames

__all__ = ["load_event_frames", "prepare_event_frames", "file_to_frames"]

def prepare_event_frames(spec: DatasetSpec | str, root: str | Path | None, T: int, train: bool, split: str = "count",
                         cache_dir: str | Path | None = None, workers: int | None = None,
                         progress: bool = True, allow_empty: bool = False, verify: bool = False,
                         hash_sources: bool = False, **options) -> Path:
    """Build (or find) the frame cache of one split; returns its folder (see :mod:`.cache`).

    ``spec``: the event dataset's record or its name.
    ``root=None`` means ``default_root()/<name>``.  A recording without events stops the build
    with its path unless ``allow_empty`` (then it is an all-zero sample).  A recording whose bytes
    are those of a recording of the other split is refused before any cache is built.
    ``hash_sources``: a finished cache is reused only once every recording hashes as recorded (not
    only its stat and edges); ``verify``: the frames too.
    """
    info = as_dataset(spec, events=True)
    if root is None:
        root = default_root() / info.name
    reader_opts = {k: options.pop(k) for k in info.reader_options if k in options}
    samples = list_samples(info, root, train, **options)
    params = {"dataset": info.name, "train": bool(train), "T": int(T), "split": split,
              "sensor_size": list(info.sensor_size), "reader_opts": reader_opts, "list_options": options,
              "allow_empty": bool(allow_empty)}
    base = Path(cache_dir) if cache_dir is not None else default_root() / "frames"
    folder = _folder(base, params, samples)
    unseen = _refuse_copies(info, root, train, samples, options, folder, again=verify or hash_sources)
    fresh = not (folder / "meta.json").is_file()
    stored = {**params, "data_dir": os.path.abspath(dataset_folder(root))}  # not in the key: --data-dir of the advice
    folder = build_frames_cache(samples, folder, T, split, info.sensor_size, reader_opts, stored, workers=workers,
                                progress=progress, allow_empty=allow_empty, verify=verify, hash_sources=hash_sources)
    if unseen:  # kept once the cache is there: a refused build leaves no folder behind for it
        try:
            atomic_write_text(folder / NO_COPIES, unseen + "\n")
        except OSError:  # a read-only cache folder: the next start compares again, nothing else changes
            pass
    if fresh:
        _say_older(base, folder)
    return folder


def _folder(base: Path, params: dict, samples) -> Path:
    """The cache folder of a split: ``<dataset>-<split>-T<T>-<slicing>-<key>`` (see :mod:`.cache`)."""
    split = "train" if params["train"] else "test"
    return base / f"{params['dataset']}-{split}-T{params['T']}-{params['split']}-{cache_key(params, samples)[:16]}"


_COMPARED: set = set()  # the (train, test) recording lists this process has compared already
NO_COPIES = ".no-copies"  # in a split's cache folder: the key of the lists last compared and found free of copies


def _refuse_copies(spec: DatasetSpec, root, train: bool, samples, options: dict, folder: Path,
                   again: bool = False) -> str | None:
    """Refuse a recording of this split (``samples``) whose bytes are a recording of the other split
    (a copy is a train/test leak as much as the symlink the lister refuses), before any cache is
    built: sizes first, then hashes of the files alike (:func:`.fingerprint.same_bytes`).

    Once per pair of lists (every path's size, mtime, inode and ctime: an edit in place with the
    mtime put back still changes the ctime): the key of lists found free of copies is kept in this
    process and, by the caller once the cache is built, in ``folder/.no-copies`` (returned when that
    file does not hold it yet), so loading the test split after the train split, and every later
    start on the same files, compares nothing again (N-MNIST's sizes collide, so a comparison reads
    the first 4 KiB of nearly every file).  ``again`` (``plif data prepare``, which hashes every
    recording anyway): compare once in this process all the same."""
    try:
        others = list_samples(spec, root, not train, **options)
    except (OSError, ValueError):  # the other split is not there (yet): its own prepare compares
        return None
    ours, theirs = sorted({str(s.path) for s in samples}), sorted({str(s.path) for s in others})
    stats = {p: _stat(p) for p in ours + theirs}
    listed = [[p, *stats[p]] for p in (ours + theirs if train else theirs + ours)]  # one key from either split
    key = hashlib.sha256(json.dumps(listed).encode()).hexdigest()
    kept = folder / NO_COPIES
    try:
        known = kept.read_text().strip() == key
    except (OSError, UnicodeDecodeError):
        known = False
    if key not in _COMPARED and (again or not known):
        copies = same_bytes(ours, theirs, sizes={p: s[0] for p, s in stats.items()})
        if copies:
            mine, twin = copies[0]
            ours_is, theirs_is = ("train", "test") if train else ("test", "train")
            raise ValueError(f"{spec.name}: {mine} ({ours_is}) holds the same bytes as {twin} ({theirs_is}) "
                             f"({len(copies)} such): a train/test leak; remove the copy")
    _COMPARED.add(key)
    return None if known else key


def _stat(path: str) -> list[int]:
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]


def _say_older(base: Path, folder: Path) -> None:
    """After a new build: name the older caches of the same dataset, split, T and slicing (they
    pile up silently otherwise) and how to remove them."""
    from .clean import older_caches
    from ..memory import format_bytes

    group = folder.name.rsplit("-", 1)[0]
    old = [c for c in older_caches(base, keep=folder) if c.path.name.rsplit("-", 1)[0] == group]
    if old:
        print(f"plif: note: {len(old)} older frame cache(s) of {group} take {format_bytes(sum(c.nbytes for c in old))} "
              f"under {base} (e.g. {old[0].path.name}); plif data clean --cache-dir {base} removes them",
              file=sys.stderr)


def load_event_frames(spec: DatasetSpec | str, root: str | Path | None, T: int, train: bool, split: str = "count",
                      cache_dir: str | Path | None = None, workers: int | None = None,
                      progress: bool = True, allow_empty: bool = False, **options) -> tuple[torch.Tensor, torch.Tensor]:
    """Frames and labels of a whole split of the event dataset whose record (or name) is ``spec``.

    Returns ``frames [N, T, 2, H, W]`` of integer event counts (uint8 / int16 / int32, whichever
    holds the largest count; call ``.float()`` per batch) backed by a memory-mapped cache file,
    so CIFAR10-DVS need not fit in RAM, and ``labels [N]`` int64.  The first call builds the
    cache under ``cache_dir`` (default ``default_root()/frames``) with ``workers`` processes.
    ``options``: ``flip_x`` (CIFAR10-DVS AEDAT 2.0 orientation, default True),
    ``train_fraction`` (CIFAR10-DVS and N-Caltech101 split, default 0.9); ``allow_empty`` keeps recordings
    without events as all-zero samples instead of refusing them.
    """
    folder = prepare_event_frames(spec, root, T, train, split, cache_dir, workers, progress, allow_empty, **options)
    frames, labels = load_cached(folder, check=False)  # checked by prepare_event_frames
    return torch.from_numpy(frames), torch.from_numpy(np.asarray(labels, dtype=np.int64))
