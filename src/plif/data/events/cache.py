"""Disk cache of integrated frames: built once in parallel, resumable, checked, never stale.

Folder: ``<dataset>-<split>-T<T>-<slicing>-<key>`` where the key hashes every parameter that
changes the frames (dataset, split, T, slicing, sensor size, reader and list options) and every
sample's path, label and cut.  What the files *contain* is checked through ``meta.json``:

* ``sources``: a fingerprint (size, mtime_ns, inode, the hash of its first and last 64 KiB and the
  BLAKE2 hash of the whole, see :mod:`.fingerprint`) of every recording.  Every load compares the
  stat and hashes the edges; a stat change makes the whole hash decide, so an edit of a recording,
  even one that keeps its size (or puts its mtime back, within the edges), rebuilds the cache.
* ``files``: shape, dtype, byte size, checksum and stat of ``frames.npy`` ``[N, T, 2, H, W]``
  (counts, the smallest of uint8 / int16 / int32 that holds them) and ``labels.npy`` ``[N]``.
  Every load checks the structure (sizes, npy headers, shapes against T / N / sensor) and the
  labels' checksum; the frames' checksum is checked when the file's stat changed, when it is
  small, at the end of every build and by ``plif data verify``.

``hash_sources`` (``plif data prepare``) hashes every recording in full before a finished cache is
reused, so an edit anywhere that kept size, mtime and inode rebuilds it too; ``verify``
(``plif data prepare --verify``) hashes the frames as well.

Samples are integrated in chunks by worker processes (which end when their parent dies); each
finished chunk is written atomically with a sidecar holding its checksum and its recordings'
fingerprints, so an interrupted build resumes from the intact chunks only.  One process builds a
folder at a time (a lock file); the builder removes temp files that dead builds left, and the
others wait for it and read what it built (or fail with its message).  The join
checks free space first and writes with ordinary writes, so a full disk is a clean error.
"""
from __future__ import annotations

import concurrent.futures as cf
import hashlib
import io
import json
import os
import shlex
import shutil
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ...atomic import atomic_save_npy, atomic_write_bytes
from ...filelock import FileLock
from ...progress import work_bar
from .datasets import EventSample
from .clean import foreign_entries
from .detect import read_events
from ..frames import check_frame_shape, events_to_frames, frame_shape
from .fingerprint import file_hash, file_stat, fingerprint, same_content
from .gesture import cut_events
from .spike_h5 import open_spike_file

__all__ = ["CACHE_VERSION", "CacheError", "cache_key", "build_frames_cache", "load_cached", "check_cache",
           "count_dtype", "EmptyRecordingError"]

CACHE_VERSION = 2  # bump when reader or integration code changes what a cache holds
CHEAP_CHECK_BYTES = 64 << 20  # frames files up to this size are checksummed on every load
_SPACE_MARGIN = 16 << 20


class CacheError(ValueError):
    """A cache file that is missing, damaged or stale; the message names it and says what to do."""


class EmptyRecordingError(ValueError):
    """A recording (or gesture cut) without events, refused unless ``allow_empty``."""


def count_dtype(max_count: int) -> np.dtype:
    """Smallest integer dtype that holds event counts up to ``max_count`` exactly."""
    for dt in (np.uint8, np.int16, np.int32):
        if max_count <= np.iinfo(dt).max:
            return np.dtype(dt)
    return np.dtype(np.int64)


def cache_key(params: dict, samples: list[EventSample]) -> str:
    """sha256 over the parameters and every sample's path, label and cut (content: ``meta.json``)."""
    h = hashlib.sha256()
    h.update(json.dumps({"version": CACHE_VERSION, **params}, sort_keys=True).encode())
    for s in samples:
        entry = [os.path.abspath(s.path), s.label, s.start, s.end] + ([s.index] if s.index is not None else [])
        h.update(json.dumps(entry).encode())
    return h.hexdigest()

@contextmanager
def writing(path) -> None:
    """An ``OSError`` while writing ``path`` (a full disk: ``No space left on device``) becomes a
    :class:`CacheError` that names the file; what was written before stays (chunks resume)."""
    try:
        yield
    except OSError as e:
        raise CacheError(f"{path}: {e.strerror or e}; nothing half-written was kept (finished chunks stay), "
                         "free some space or use another --cache-dir, then run again") from None

# ------------------------------------------------------------------ workers


def _watch_parent(parent: int) -> None:
    """Worker initializer: end this process when its parent is gone (kill -9 included)."""
    def watch():
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _sample_events(s: EventSample, sensor_size, reader_opts: dict, memo: dict) -> np.ndarray:
    if s.index is not None:  # one entry of a file that holds many (SHD / SSC's HDF5): kept open for the chunk
        if memo.get("path") != s.path:
            _close(memo)
            memo["open"] = open_spike_file(s.path)
            memo["path"] = s.path
        return memo["open"].events(s.index, int(sensor_size[0]))
    if memo.get("path") != s.path:  # consecutive gesture cuts share a recording: read it once
        _close(memo)
        memo["path"], memo["events"] = s.path, read_events(s.path, sensor_size=tuple(sensor_size), **reader_opts)
    return memo["events"]


def _close(memo: dict) -> None:
    """Close the file a chunk kept open (:func:`_sample_events`) and forget what it read."""
    held = memo.pop("open", None)
    if held is not None:
        held.close()
    memo.clear()


def _sample_frames(s: EventSample, T: int, split: str, sensor_size, reader_opts: dict, memo: dict,
                   allow_empty: bool) -> np.ndarray:
    ev = _sample_events(s, sensor_size, reader_opts, memo)
    if s.start is not None:
        ev = cut_events(ev, s.start, s.end)
    if len(ev) == 0 and not allow_empty:
        cut = f" in its cut [{s.start}, {s.end}) us" if s.start is not None else ""
        raise EmptyRecordingError(f"empty recording: no events{cut}; a dataset refuses it (allow_empty=True / "
                                  "--allow-empty keeps it as an all-zero sample)")
    return events_to_frames(ev, T, tuple(sensor_size), split)  # _build_chunk names the file in any error


def _build_chunk(samples: list[EventSample], out: str, T: int, split: str, sensor_size, reader_opts: dict,
                 allow_empty: bool = False, known: dict | None = None) -> int:
    """Worker: frames of ``samples`` -> ``out`` (``.npy`` ``[k, T, *frame]`` of counts) and its
    sidecar ``out.json`` (checksum, count, recordings' fingerprints); returns k.  ``known``: the
    fingerprints the parent took once of the files that hold many samples (an SHD split is one
    file: hashed once per build, not once per chunk).

    Any failure is re-raised as ``RuntimeError`` naming the file, so the parent can say which
    sample stopped the build.
    """
    memo: dict = {}
    frames, sources = [], {}
    try:
        for s in samples:
            try:
                frames.append(_sample_frames(s, T, split, sensor_size, reader_opts, memo, allow_empty))
                if s.path not in sources:
                    sources[s.path] = (known or {}).get(s.path) or fingerprint(s.path)
            except Exception as e:  # the reader's message names the file already: said once
                raise RuntimeError(f"{s.path}: {type(e).__name__}: {str(e).removeprefix(f'{s.path}: ')}") from None
    finally:
        _close(memo)
    arr = np.stack(frames)
    arr = arr.astype(count_dtype(int(arr.max()) if arr.size else 0))
    buf = io.BytesIO()
    np.save(buf, arr)
    data = buf.getvalue()
    side = {"n": len(samples), "checksum": hashlib.blake2b(data, digest_size=16).hexdigest(), "sources": sources}
    with writing(out):
        atomic_write_bytes(out, data)
        atomic_write_bytes(out + ".json", json.dumps(side).encode())
    return len(samples)


def _chunk_ok(path: Path, n: int) -> dict | None:
    """The sidecar of an intact chunk of ``n`` samples whose recordings are unchanged, else None."""
    side_path = Path(str(path) + ".json")
    try:
        side = json.loads(side_path.read_text())
        ok = side["n"] == n and file_hash(path) == side["checksum"]
        ok = ok and all(same_content(p, fp) for p, fp in side["sources"].items())
    except (OSError, ValueError, KeyError, TypeError):
        ok = False
    return side if ok else None

# ------------------------------------------------------------------ the build


def _remove_stale_temps(folder: Path) -> None:
    """Called with the build lock held: every temp file here belongs to a dead build."""
    for d in (folder, folder / "chunks"):
        if d.is_dir():
            for p in d.glob(".*.tmp"):
                p.unlink(missing_ok=True)


WAIT_REPORT_S = 30.0  # a process waiting on another's build says so this often
_FAILED = ".build.failed"  # the message of the last failed build, for the processes that waited on it


class _Lock:
    """The folder's build lock.  ``wait``: when another process holds it, wait for that build (saying
    so on stderr, with its progress) instead of refusing; ``waited`` then tells the caller to look
    at what it left (a finished cache, or the failure it recorded)."""

    def __init__(self, folder: Path, wait: bool = True):
        self.path = folder / ".build.lock"
        self.wait, self.waited = wait, False

    def __enter__(self):
        self.lock = FileLock(self.path)
        if not self.lock.try_acquire():
            if not self.wait:
                raise CacheError(f"{self.path.parent}: another process (pid {self.lock.holder()}) is building "
                                 "this cache now") from None
            self._wait()
        return self

    def _wait(self) -> None:
        folder, t0, said = self.path.parent, time.monotonic(), -WAIT_REPORT_S
        while not self.lock.try_acquire():
            waited = time.monotonic() - t0
            if waited - said >= WAIT_REPORT_S:
                done = len(list((folder / "chunks").glob("chunk_*.npy.json"))) if (folder / "chunks").is_dir() else 0
                print(f"plif: waiting for process {self.lock.holder()} to build the frame cache {folder.name} "
                      f"({done} chunks done, waited {waited:.0f} s)", file=sys.stderr, flush=True)
                said = waited
            time.sleep(0.2)
        self.waited = True

    def __exit__(self, *exc):
        self.lock.release()


def _finished(folder: Path, T: int, split: str, n: int, sensor_size, deep: bool = False,
              hash_sources: bool = False) -> bool:
    """``folder`` holds an intact, up-to-date cache of these samples (else says why on stderr).
    ``deep``: every recording and the frames are hashed, whatever their stat says; ``hash_sources``:
    every recording."""
    if not (folder / "meta.json").is_file():
        return False
    try:
        meta = check_cache(folder, deep=deep, sources=True, advise=False, hash_sources=hash_sources)
        asked = [T, split, n, list(sensor_size)]
        held = [meta["T"], meta["split"], meta["samples"], meta["sensor_size"]]
        if held != asked:
            raise CacheError(f"{folder / 'meta.json'}: holds T, slicing, N, sensor = {held}, asked for {asked}")
        return True
    except CacheError as e:
        print(f"plif: rebuilding the frame cache: {e}", file=sys.stderr)
        return False


def build_frames_cache(samples: list[EventSample], folder: str | Path, T: int, split: str,
                       sensor_size: tuple[int, int], reader_opts: dict | None = None,
                       params: dict | None = None, workers: int | None = None, chunk_size: int = 64,
                       progress: bool = True, allow_empty: bool = False, wait: bool = True,
                       verify: bool = False, hash_sources: bool = False) -> Path:
    """Make ``folder`` hold ``frames.npy`` ``[N, T, 2, H, W]`` and ``labels.npy`` ``[N]`` for ``samples``.

    ``workers``: processes (None = all CPUs, 0 = run in this process).  A finished folder whose
    files are intact and whose recordings are unchanged is returned as it is; a damaged or stale
    one is rebuilt (saying why on stderr); a partial one resumes from its intact chunks.  The
    first failing sample stops the build with a ``RuntimeError`` naming its file; a recording
    without events is such a failure unless ``allow_empty``.

    One process builds a folder at a time.  Another process asking for it meanwhile (every rank of
    a ``torchrun`` job does) waits for that build, saying so on stderr every
    :data:`WAIT_REPORT_S` seconds, then uses the finished cache; when that build failed it raises
    the builder's message as a ``CacheError`` (one line).  ``wait=False``: refuse instead.
    ``verify``: reuse a finished cache only once every recording and the frames hash as recorded
    (:func:`check_cache` with ``deep``), not only when their stat and edges are unchanged;
    ``hash_sources``: once every recording hashes as recorded.  ``params``: kept in ``meta.json``
    for :func:`rebuild_advice` (the dataset, split and options of the build, and ``data_dir``, the
    folder its recordings were listed from).
    """
    folder = Path(folder)
    if not samples:
        raise ValueError(f"{folder}: no samples to build a frame cache from")
    check_frame_shape(T, sensor_size, samples=min(chunk_size, len(samples)), hint="lower --T")  # one chunk in memory
    if _finished(folder, T, split, len(samples), sensor_size, verify, hash_sources):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    with _Lock(folder, wait) as lock:
        failed = folder / _FAILED
        if lock.waited:  # another process (a torchrun rank) built it meanwhile, or failed
            if failed.is_file():
                raise CacheError(failed.read_text().strip())
            if _finished(folder, T, split, len(samples), sensor_size, verify, hash_sources):
                return folder
        failed.unlink(missing_ok=True)
        _remove_stale_temps(folder)
        (folder / "meta.json").unlink(missing_ok=True)  # the cache is complete only once meta.json is back
        for name in ("frames.npy", "labels.npy"):
            (folder / name).unlink(missing_ok=True)
        try:
            return _build(samples, folder, T, split, sensor_size, dict(reader_opts or {}), params or {}, workers,
                          chunk_size, progress, allow_empty)
        except Exception as e:  # the processes waiting on this build fail with the same line
            try:
                atomic_write_bytes(failed, (" ".join(str(e).split()) or type(e).__name__).encode())
            except OSError:  # a full disk may refuse the note too: the builder's own error still counts
                pass
            raise


def _build(samples, folder: Path, T, split, sensor_size, reader_opts, params, workers, chunk_size, progress,
           allow_empty) -> Path:
    chunk_dir = folder / "chunks"
    chunk_dir.mkdir(exist_ok=True)
    chunks = [(i, samples[a:a + chunk_size]) for i, a in enumerate(range(0, len(samples), chunk_size))]
    paths = {i: chunk_dir / f"chunk_{i:06d}.npy" for i, _ in chunks}
    todo = [(i, c) for i, c in chunks if _chunk_ok(paths[i], len(c)) is None]
    done = len(samples) - sum(len(c) for _, c in todo)
    bar = work_bar(len(samples), f"frames {folder.name}", progress, initial=done)  # plain lines in logs
    many = {s.path for s in samples if s.index is not None}
    args = (T, split, sensor_size, reader_opts, allow_empty, {p: fingerprint(p) for p in sorted(many)} if todo else {})
    try:
        if workers == 0 or len(todo) <= 1:
            for i, c in todo:
                bar.update(_build_chunk(c, str(paths[i]), *args))
        else:
            _run_parallel(todo, paths, args, workers, bar)
    finally:
        bar.close()
    sides = [_chunk_ok(paths[i], len(c)) for i, c in chunks]
    bad = [str(paths[i]) for (i, _), s in zip(chunks, sides) if s is None]
    if bad:
        raise CacheError(f"{bad[0]}: chunk changed during the build ({len(bad)} such); run the build again")
    frames_info = _join_chunks([paths[i] for i, _ in chunks], sides, folder / "frames.npy", len(samples))
    labels = np.array([s.label for s in samples], dtype=np.int64)
    with writing(folder / "labels.npy"):
        atomic_save_npy(folder / "labels.npy", labels)
    sources = {}
    for s in sides:
        sources.update(s["sources"])
    meta = {"version": CACHE_VERSION, "params": params, "T": T, "split": split, "sensor_size": list(sensor_size),
            "reader_opts": reader_opts, "allow_empty": allow_empty, "samples": len(samples), "sources": sources,
            "files": {"frames.npy": frames_info, "labels.npy": _file_info(folder / "labels.npy", labels)}}
    if file_hash(folder / "frames.npy") != frames_info["checksum"]:  # read back what was written
        raise CacheError(f"{folder / 'frames.npy'}: checksum differs from the data written; disk error?")
    with writing(folder / "meta.json"):
        atomic_write_bytes(folder / "meta.json", json.dumps(meta, indent=1).encode())
    shutil.rmtree(chunk_dir, ignore_errors=True)
    return folder


def _run_parallel(todo, paths, args, workers, bar) -> None:
    pool = cf.ProcessPoolExecutor(max_workers=workers or os.cpu_count(), initializer=_watch_parent,
                                  initargs=(os.getpid(),))
    try:
        futures = {pool.submit(_build_chunk, c, str(paths[i]), *args): i for i, c in todo}
        for fut in cf.as_completed(futures):
            bar.update(fut.result())  # a worker's RuntimeError surfaces here and stops the build
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)  # finished chunks stay on disk for a resume
        raise
    pool.shutdown(wait=True)


def _file_info(path: Path, arr: np.ndarray) -> dict:
    return {"shape": list(arr.shape), "dtype": arr.dtype.str, "bytes": path.stat().st_size,
            "checksum": file_hash(path), "stat": file_stat(path)}


def _join_chunks(chunk_paths: list[Path], sides: list[dict], out: Path, n: int) -> dict:
    """Concatenate chunk files into one ``.npy`` with plain writes, then rename into place.

    Free space is checked first (and reserved with ``posix_fallocate``); a full disk is a
    ``CacheError`` and the temp file is removed.  Returns the file's entry for ``meta.json``.
    """
    heads = [np.load(p, mmap_mode="r") for p in chunk_paths]
    dtype = max((h.dtype for h in heads), key=lambda d: d.itemsize)
    shape = (n, *heads[0].shape[1:])
    del heads
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": np.lib.format.dtype_to_descr(dtype),
                                                  "fortran_order": False, "shape": shape})
    need = len(header.getvalue()) + int(np.prod(shape)) * dtype.itemsize
    free = shutil.disk_usage(out.parent).free
    if free < need + _SPACE_MARGIN:
        from ..memory import format_bytes

        raise CacheError(f"{out}: joining the chunks needs {format_bytes(need + _SPACE_MARGIN)} of free space "
                         f"({format_bytes(need)} for the file and a {format_bytes(_SPACE_MARGIN)} margin), "
                         f"{format_bytes(free)} are free; free some space or use another cache folder (--cache-dir), "
                         "then run again (the finished chunks are kept)")
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    h = hashlib.blake2b(digest_size=16)
    try:
        with open(tmp, "wb") as f:
            try:
                os.posix_fallocate(f.fileno(), 0, need)
            except OSError as e:
                raise CacheError(f"{out}: cannot reserve {need / 1e9:.2f} GB for the join: {e.strerror}") from None
            f.write(header.getvalue())
            h.update(header.getvalue())
            at = 0
            for p, side in zip(chunk_paths, sides):
                raw = p.read_bytes()
                if hashlib.blake2b(raw, digest_size=16).hexdigest() != side["checksum"]:
                    raise CacheError(f"{p}: chunk changed after it was checked; run the build again")
                block = np.ascontiguousarray(np.load(io.BytesIO(raw)).astype(dtype, copy=False)).tobytes()
                f.write(block)
                h.update(block)
                at += side["n"]
            if at != n:
                raise CacheError(f"{out}: chunks hold {at} samples, expected {n}")
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise CacheError(f"{out}: writing the joined frames failed: {e.strerror or e}; nothing was kept "
                         "but the chunks, run again once the cause is fixed") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, out)
    return {"shape": list(shape), "dtype": dtype.str, "bytes": out.stat().st_size, "checksum": h.hexdigest(),
            "stat": file_stat(out)}

# ------------------------------------------------------------------ checks and loading


_META_KEYS = {"T": int, "split": str, "sensor_size": list, "samples": int, "sources": dict, "files": dict}
_FILE_KEYS = {"shape": list, "dtype": str, "bytes": int, "checksum": str, "stat": list}


def _read_meta(folder: Path) -> dict:
    """``meta.json`` with every key the checks use, of the right type, or a :class:`CacheError`
    naming the missing or wrong key (a hand-edited or foreign file is reported, never a KeyError)."""
    path = folder / "meta.json"
    try:
        meta = json.loads(path.read_text())
    except FileNotFoundError:
        raise CacheError(f"{path}: missing: not a finished frame cache") from None
    except (OSError, ValueError) as e:
        raise CacheError(f"{path}: unreadable cache metadata ({type(e).__name__}: {e})") from None
    if not isinstance(meta, dict):
        raise CacheError(f"{path}: holds a JSON {type(meta).__name__}, not an object")
    if meta.get("version") != CACHE_VERSION:
        raise CacheError(f"{path}: cache version {meta.get('version')}, this plif writes {CACHE_VERSION}")

    def need(obj: dict, keys: dict, where: str) -> None:
        for k, typ in keys.items():
            if k not in obj:
                raise CacheError(f"{path}: {where}key {k!r} is missing")
            if not isinstance(obj[k], typ) or isinstance(obj[k], bool):
                raise CacheError(f"{path}: {where}{k!r} is {obj[k]!r}, expected a JSON {typ.__name__}")

    need(meta, _META_KEYS, "")
    for name in ("frames.npy", "labels.npy"):
        if not isinstance(meta["files"].get(name), dict):
            raise CacheError(f"{path}: files: no entry for {name!r}")
        need(meta["files"][name], _FILE_KEYS, f"files[{name!r}]: ")
    for src, fp in meta["sources"].items():
        if not (isinstance(fp, dict) and isinstance(fp.get("stat"), list) and len(fp["stat"]) == 3
                and isinstance(fp.get("hash"), str) and isinstance(fp.get("edges", ""), str)):
            raise CacheError(f"{path}: sources[{src!r}] needs a stat list [size, mtime_ns, inode] and hash strings")
    if len(meta["sensor_size"]) not in (1, 2):
        raise CacheError(f"{path}: sensor_size {meta['sensor_size']!r}, expected [H, W] or [channels]")
    return meta


def _check_file(folder: Path, name: str, info: dict, deep: bool) -> bool:
    """Structure of one cache file against its metadata; the checksum too when ``deep``, when the
    file's stat changed or the file is small.  Returns whether the stat in ``info`` was refreshed."""
    path = folder / name
    if not path.is_file():
        raise CacheError(f"{path}: missing")
    size = path.stat().st_size
    if size != info["bytes"]:
        raise CacheError(f"{path}: {size} bytes, the cache wrote {info['bytes']} (truncated or replaced)")
    try:
        arr = np.load(path, mmap_mode="r")
    except (ValueError, OSError) as e:
        raise CacheError(f"{path}: not a readable .npy file ({e})") from None
    if list(arr.shape) != info["shape"] or arr.dtype.str != info["dtype"]:
        raise CacheError(f"{path}: holds {arr.dtype.str} {list(arr.shape)}, "
                         f"the cache wrote {info['dtype']} {info['shape']}")
    del arr
    stat = file_stat(path)
    if deep or stat != info["stat"] or size <= CHEAP_CHECK_BYTES or name == "labels.npy":
        if file_hash(path) != info["checksum"]:
            raise CacheError(f"{path}: checksum mismatch: the file was changed or damaged")
        if stat != info["stat"]:
            info["stat"] = stat
            return True
    return False


def rebuild_advice(folder: Path, meta: dict | None = None) -> str:
    """How to rebuild ``folder``, true for every fault: ``plif data prepare --verify`` with the options of
    its build (it hashes everything, so it also rebuilds after an edit that kept size, mtime and inode,
    which a plain load does not notice), or deleting it (the next load rebuilds it), which is said only
    when the folder holds nothing but a cache's files: never delete what plif did not write."""
    p = meta.get("params") if isinstance(meta, dict) and isinstance(meta.get("params"), dict) else {}
    if p.get("dataset") and isinstance(p.get("train"), bool):
        flags = [f"--T {meta['T']}", f"--split {meta['split']}", "--train-only" if p["train"] else "--test-only"]
        flags += ["--allow-empty"] if p.get("allow_empty") else []
        flags += ["--no-flip-x"] if (p.get("reader_opts") or {}).get("flip_x") is False else []
        cmd = (f"plif data prepare {p['dataset']} --verify {' '.join(flags)} --cache-dir {shlex.quote(str(folder.parent))} "
               f"--data-dir {_data_dir(p)}")
    else:
        cmd = "plif data prepare DATASET --verify with the options of its build"
    foreign = foreign_entries(folder)
    if foreign:
        return (f"rebuild it: {cmd}; do not delete {folder}: it also holds files a cache build does not "
                f"write ({', '.join(map(repr, foreign[:3]))}{', ...' if len(foreign) > 3 else ''})")
    return f"rebuild it: {cmd}, or delete {folder} (the next load rebuilds it)"


def _data_dir(params: dict) -> str:
    """The folder the cache's recordings were listed from (``data_dir``, stored by the build), quoted
    for a shell; ``DIR`` where ``meta.json`` holds none (a cache built before plif stored it)."""
    folder = params.get("data_dir")
    return shlex.quote(folder) if isinstance(folder, str) and folder else "DIR"


def check_cache(folder: str | Path, deep: bool = False, sources: bool = False, advise: bool = True,
                hash_sources: bool = False) -> dict:
    """Check a finished cache folder; returns its metadata or raises :class:`CacheError` naming
    the bad file and (``advise``) saying how to rebuild (:func:`rebuild_advice`).

    Always: metadata, file sizes, npy headers, shapes against T / N / sensor, the labels'
    checksum.  ``deep``: the frames' checksum too.  ``sources``: every recording's fingerprint:
    its stat and edges, and its whole hash where the stat changed, or always with ``deep`` or
    ``hash_sources`` (``plif data verify`` and ``prepare`` hash every recording, so an edit that
    kept size, mtime and inode is found wherever it is).
    """
    folder = Path(folder)
    try:
        meta = _read_meta(folder)
    except CacheError as e:
        raise CacheError(f"{e} ({rebuild_advice(folder)})" if advise else str(e)) from None
    n, T = meta["samples"], meta["T"]
    want = [n, T, *frame_shape(meta["sensor_size"])]
    how = f" ({rebuild_advice(folder, meta)})" if advise else ""
    try:
        if meta["files"]["frames.npy"]["shape"] != want or meta["files"]["labels.npy"]["shape"] != [n]:
            sensor = "x".join(map(str, meta["sensor_size"]))
            raise CacheError(f"{folder / 'meta.json'}: file shapes disagree with T={T}, N={n}, sensor {sensor}")
        refreshed = False
        for name in ("frames.npy", "labels.npy"):
            refreshed |= _check_file(folder, name, meta["files"][name], deep)
        if sources:
            for p, fp in meta["sources"].items():
                old = dict(fp)
                if not same_content(p, fp, always_hash=deep or hash_sources):
                    raise CacheError(f"{p}: recording changed or missing since the cache {folder.name} was built")
                refreshed |= fp != old
    except CacheError as e:
        raise CacheError(str(e) + how) from None
    if refreshed:  # same bytes, new stat (copied, touched) or no edges yet: remember, so the hash is not redone
        atomic_write_bytes(folder / "meta.json", json.dumps(meta, indent=1).encode())
    return meta


def load_cached(folder: str | Path, check: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``frames [N, T, 2, H, W]`` (copy-on-write memory map: pages load on use) and ``labels [N]``,
    after :func:`check_cache` (``check=False``: the caller has just had the folder from
    :func:`build_frames_cache`, which checked it)."""
    folder = Path(folder)
    if check:
        check_cache(folder)
    return np.load(folder / "frames.npy", mmap_mode="c"), np.load(folder / "labels.npy")
