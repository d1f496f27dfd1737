"""Old frame caches: find them and remove them (``plif data clean``).

A cache folder is ``<dataset>-<train|test>-T<T>-<slicing>-<key>`` (see :mod:`.cache`).  Caches of
one *group* (same dataset, split, T and slicing) differ only in their recordings or options, so
all but the newest of a group are *older* ones: a changed recording or option made a new folder
and left the old one (6.5 GB each for CIFAR10-DVS).  A folder without ``meta.json`` is an
unfinished build.  Nothing else in the cache folder is ever touched, nor a cache being built.
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ...filelock import FileLock

__all__ = ["CacheFolder", "cache_folders", "cache_like_folders", "older_caches", "remove_cache", "NAME",
           "foreign_entries", "holds_cache_files"]

CACHE_FILES = ("meta.json", "frames.npy", "labels.npy", "chunks", ".build.lock")  # what a cache folder holds
NAME = re.compile(r"^(?P<dataset>.+)-(?P<split>train|test)-T(?P<T>\d+)-(?P<slicing>count|time)-(?P<key>[0-9a-f]{16})$")


@dataclass(frozen=True)
class CacheFolder:
    path: Path
    group: tuple[str, str, int, str]  # dataset, split, T, slicing
    finished: bool  # meta.json present
    built: float  # mtime of meta.json (or of the folder while unfinished)
    nbytes: int


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def cache_folders(base: str | Path) -> list[CacheFolder]:
    """Every folder directly under ``base`` named like a frame cache, oldest first."""
    base = Path(base)
    if not base.is_dir():
        return []
    found = []
    for d in base.iterdir():
        m = NAME.match(d.name)
        if not m or not d.is_dir() or d.is_symlink():
            continue
        meta = d / "meta.json"
        finished = meta.is_file()
        built = (meta if finished else d).stat().st_mtime
        found.append(CacheFolder(d, (m["dataset"], m["split"], int(m["T"]), m["slicing"]), finished, built, _size(d)))
    return sorted(found, key=lambda c: c.built)


def cache_like_folders(base: str | Path) -> list[Path]:
    """Every folder directly under ``base`` that is named like a frame cache or holds a cache's files
    (a renamed copy too), sorted by name: what ``plif data verify`` checks, so that a cache whose
    ``meta.json`` is gone is reported, not skipped.  Only listed, never removed."""
    base = Path(base)
    if not base.is_dir():
        return []
    return sorted(d for d in base.iterdir() if d.is_dir() and not d.is_symlink()
                  and (NAME.match(d.name) or holds_cache_files(d)))


def holds_cache_files(folder: str | Path) -> bool:
    """Whether ``folder`` holds any file a frame cache is made of (``meta.json``, ``frames.npy``, ...)."""
    return any(os.path.lexists(Path(folder) / f) for f in CACHE_FILES)


def foreign_entries(folder: str | Path) -> list[str]:
    """The names in ``folder`` that no frame cache build writes (recordings, notes, anything a user
    put there), sorted; empty when deleting ``folder`` would lose nothing but a cache."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(n for n in names if n not in CACHE_FILES and not (n.startswith(".") and n.endswith(".tmp")))


def older_caches(base: str | Path, keep: str | Path | None = None) -> list[CacheFolder]:
    """Finished caches that a newer finished cache of their group replaces (``keep``, when given,
    counts as the newest of its group), and unfinished builds other than ``keep``."""
    folders = cache_folders(base)
    keep = Path(keep).resolve() if keep is not None else None
    newest: dict[tuple, CacheFolder] = {}
    for c in folders:
        if c.finished:
            newest[c.group] = c  # oldest first: the last one wins
    if keep is not None:
        for c in folders:
            if c.path.resolve() == keep:
                newest[c.group] = c
    return [c for c in folders if (c.path.resolve() != keep) and (not c.finished or newest.get(c.group) is not c)]


def remove_cache(folder: CacheFolder) -> bool:
    """Delete one cache folder unless a build holds its lock now; True when it was removed."""
    lock = FileLock(folder.path / ".build.lock")
    if lock.path.exists():
        if not lock.try_acquire():
            return False  # being built right now
        try:
            shutil.rmtree(folder.path)
        finally:
            lock.release()
        return True
    shutil.rmtree(folder.path)
    return True
