"""Disk cache of integrated frames: built once in parallel, resumable, never stale.

The cache folder's name holds a hash of everything that changes the frames (dataset, split,
T, slicing method, sensor size, reader options such as the x orientation, the file list with
each file's size and cut), so changing any of them builds a new cache instead of reusing an old
one.  Samples are processed in chunks by worker processes; each finished chunk is written
atomically to ``chunks/``, so an interrupted build resumes from the chunks already done.  At the
end the chunks are joined into one ``frames.npy`` ``[N, T, 2, H, W]`` (integer counts, the
smallest of uint8 / int16 / int32 that holds them) plus ``labels.npy`` ``[N]`` int64.
"""
from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ...atomic import atomic_save_npy, atomic_write_bytes
from ..frames import events_to_frames
from .datasets import EventSample
from .detect import read_events
from .gesture import cut_events

__all__ = ["CACHE_VERSION", "cache_key", "build_frames_cache", "load_cached", "count_dtype"]

CACHE_VERSION = 1  # bump when reader or integration code changes what a cache holds


def count_dtype(max_count: int) -> np.dtype:
    """Smallest integer dtype that holds event counts up to ``max_count`` exactly."""
    for dt in (np.uint8, np.int16, np.int32):
        if max_count <= np.iinfo(dt).max:
            return np.dtype(dt)
    return np.dtype(np.int64)


def cache_key(params: dict, samples: list[EventSample]) -> str:
    """sha256 over the parameters and every sample's path, size on disk, label and cut."""
    h = hashlib.sha256()
    h.update(json.dumps({"version": CACHE_VERSION, **params}, sort_keys=True).encode())
    for s in samples:
        size = os.path.getsize(s.path) if os.path.exists(s.path) else -1
        h.update(json.dumps([os.path.abspath(s.path), size, s.label, s.start, s.end]).encode())
    return h.hexdigest()


def _sample_frames(s: EventSample, T: int, split: str, sensor_size, reader_opts: dict, memo: dict) -> np.ndarray:
    if memo.get("path") != s.path:  # consecutive gesture cuts share a recording: read it once
        memo["path"], memo["events"] = s.path, read_events(s.path, **reader_opts)
    ev = memo["events"]
    if s.start is not None:
        ev = cut_events(ev, s.start, s.end)
    return events_to_frames(ev, T, sensor_size, split)


def _build_chunk(samples: list[EventSample], out: str, T: int, split: str, sensor_size, reader_opts: dict) -> int:
    """Worker: frames of ``samples`` -> one ``.npy`` ``[k, T, 2, H, W]`` of counts; returns k.

    Any failure is re-raised as ``RuntimeError`` naming the file, so the parent can say which
    sample stopped the build.
    """
    memo: dict = {}
    frames = []
    for s in samples:
        try:
            frames.append(_sample_frames(s, T, split, sensor_size, reader_opts, memo))
        except Exception as e:
            raise RuntimeError(f"{s.path}: {type(e).__name__}: {e}") from None
    arr = np.stack(frames)
    atomic_save_npy(out, arr.astype(count_dtype(int(arr.max()) if arr.size else 0)))
    return len(samples)


def build_frames_cache(samples: list[EventSample], folder: str | Path, T: int, split: str,
                       sensor_size: tuple[int, int], reader_opts: dict | None = None,
                       params: dict | None = None, workers: int | None = None, chunk_size: int = 64,
                       progress: bool = True) -> Path:
    """Make ``folder`` hold ``frames.npy`` ``[N, T, 2, H, W]`` and ``labels.npy`` ``[N]`` for ``samples``.

    ``workers``: processes (None = all CPUs, 0 = run in this process).  A finished folder is
    returned as it is; a partial one resumes.  The first failing sample stops the build with a
    ``RuntimeError`` naming its file.
    """
    folder = Path(folder)
    frames_path = folder / "frames.npy"
    if frames_path.is_file() and (folder / "labels.npy").is_file():
        return folder
    if not samples:
        raise ValueError(f"{folder}: no samples to build a frame cache from")
    reader_opts = dict(reader_opts or {})
    chunk_dir = folder / "chunks"
    chunk_dir.mkdir(parents=True, exist_ok=True)
    meta = {"params": params or {}, "T": T, "split": split, "sensor_size": list(sensor_size),
            "reader_opts": reader_opts, "samples": len(samples), "version": CACHE_VERSION}
    atomic_write_bytes(folder / "meta.json", json.dumps(meta, indent=1).encode())
    chunks = [(i, samples[a:a + chunk_size]) for i, a in enumerate(range(0, len(samples), chunk_size))]
    paths = {i: chunk_dir / f"chunk_{i:06d}.npy" for i, _ in chunks}
    todo = [(i, c) for i, c in chunks if not paths[i].is_file()]
    done = len(samples) - sum(len(c) for _, c in todo)
    bar = tqdm(total=len(samples), initial=done, unit="sample", desc=f"frames {folder.name}", disable=not progress)
    try:
        if workers == 0 or len(todo) <= 1:
            for i, c in todo:
                bar.update(_build_chunk(c, str(paths[i]), T, split, sensor_size, reader_opts))
        else:
            _run_parallel(todo, paths, T, split, sensor_size, reader_opts, workers, bar)
    finally:
        bar.close()
    _join_chunks([paths[i] for i, _ in chunks], frames_path, len(samples))
    atomic_save_npy(folder / "labels.npy", np.array([s.label for s in samples], dtype=np.int64))
    shutil.rmtree(chunk_dir, ignore_errors=True)
    return folder


def _run_parallel(todo, paths, T, split, sensor_size, reader_opts, workers, bar) -> None:
    pool = cf.ProcessPoolExecutor(max_workers=workers or os.cpu_count())
    try:
        futures = {pool.submit(_build_chunk, c, str(paths[i]), T, split, sensor_size, reader_opts): i
                   for i, c in todo}
        for fut in cf.as_completed(futures):
            bar.update(fut.result())  # a worker's RuntimeError surfaces here and stops the build
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)  # finished chunks stay on disk for a resume
        raise
    pool.shutdown(wait=True)


def _join_chunks(chunk_paths: list[Path], out: Path, n: int) -> None:
    """Concatenate chunk files into one ``.npy`` through a memory map, then rename into place."""
    heads = [np.load(p, mmap_mode="r") for p in chunk_paths]
    dtype = max((h.dtype for h in heads), key=lambda d: d.itemsize)
    shape = (n, *heads[0].shape[1:])
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    dst = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=shape)
    at = 0
    for h in heads:
        dst[at:at + len(h)] = h
        at += len(h)
    if at != n:
        raise RuntimeError(f"{out}: chunks hold {at} samples, expected {n}")
    dst.flush()
    del dst, heads
    os.replace(tmp, out)


def load_cached(folder: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """``frames [N, T, 2, H, W]`` (copy-on-write memory map: pages load on use) and ``labels [N]``."""
    folder = Path(folder)
    return np.load(folder / "frames.npy", mmap_mode="c"), np.load(folder / "labels.npy")
