"""Fetch, check and unpack an event dataset's archives, or say how to get the ones that need a browser.

The mechanism only: what to fetch (file names, mirrors, MD5 sums, the members each archive must
hold, why an archive must be fetched by hand) is the dataset's record
(:class:`plif.catalog.Archive` in ``DatasetSpec.archives``, ``DatasetSpec.manual``), so a new
event dataset with a download is one record.

Each archive is fetched through :func:`plif.data.download.download_file` (mirrors, MD5, resume
of a ``.part`` left by an interrupted transfer), unpacked with :func:`plif.data.archive.extract_archive`
(no path traversal, links, bombs or duplicate names; the members the record says it holds must be
there; moved into place only once complete), then a stamp ``.plif-unpacked/<archive>.md5``
records it so a second call does nothing.  The dataset is called ready only once the loaders find
both splits and a few recordings of each (:data:`SAMPLE_FILES`, spread over the list) read as event
files: folders of the right names holding something else are refused, not stamped ready.  The archive is removed after unpacking unless ``keep_archives``.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..atomic import atomic_write_text
from .archive import Limits, extract_archive
from ..catalog import DATASETS, Archive, DatasetSpec, as_dataset, dataset_folder, default_root
from .download import download_file, file_md5

__all__ = ["download_event_dataset", "manual_steps", "dataset_root", "download_help"]

_STAMPS = ".plif-unpacked"
SAMPLE_FILES = 3  # recordings of each split read (first, middle, last) before a download is called ready


def dataset_root(spec: DatasetSpec | str, root: str | Path | None) -> Path:
    """Where the dataset's files go: ``root``, or ``$PLIF_DATA_ROOT/<name>`` (what the loaders read by default)."""
    return dataset_folder(root if root is not None else default_root() / as_dataset(spec).name)


def download_help() -> str:
    """Which event datasets ``plif data download`` / ``plif train --download`` fetch, and which need manual
    steps, as their records say."""
    auto = [n for n, d in DATASETS.items() if d.is_event and d.archives and d.manual is None]
    manual = [n for n, d in DATASETS.items() if d.is_event and d.archives and d.manual is not None]
    return f"{', '.join(auto)}; {', '.join(manual)}: prints the manual steps" if manual else ", ".join(auto)


def manual_steps(spec: DatasetSpec | str, root: str | Path | None = None) -> str:
    """The exact steps for a dataset (its record ``spec``, or its name) whose archives cannot be fetched
    without a browser."""
    spec = as_dataset(spec, events=True)
    name = spec.name
    folder = dataset_root(spec, root)
    flag = "" if root is None else f" --data-dir {folder}"
    steps = [f"open {a.urls[0]} and download {a.filename} (md5 {a.md5}) into {folder}/" for a in spec.archives]
    steps.append(f"run: plif data download {name}{flag}\n     (checks the md5 and unpacks it safely into {folder}/)")
    return (f"{name} cannot be downloaded automatically ({spec.manual}). Steps:\n"
            + "\n".join(f"  {i}. {s}" for i, s in enumerate(steps, 1)))


def _stamp(root: Path, a: Archive) -> Path:
    return root / _STAMPS / f"{a.filename}.md5"


def _done(root: Path, a: Archive) -> bool:
    s = _stamp(root, a)
    return s.is_file() and s.read_text().strip() == a.md5


def _spread(paths: list[str], k: int) -> list[str]:
    """Up to ``k`` of ``paths`` spread evenly from the first to the last (all when there are fewer)."""
    if len(paths) <= k:
        return paths
    return [paths[round(i * (len(paths) - 1) / (k - 1))] for i in range(k)] if k > 1 else paths[:1]


def _loaders_miss(spec: DatasetSpec, folder: Path) -> str | None:
    """Why the loaders do not find both splits in ``folder`` or cannot read a sample of their recordings
    (:data:`SAMPLE_FILES` a split, read as ``prepare`` reads them; an empty file is none), or None when they can."""
    from .events.datasets import list_samples
    from .events.detect import read_events

    from .events.spike_h5 import read_spike_sample

    try:
        for train in (True, False):
            samples = list_samples(spec, folder, train)
            if samples[0].index is not None:  # entries of one file (SHD / SSC's HDF5): a spread of them
                for s in _spread(samples, SAMPLE_FILES):
                    read_spike_sample(s.path, s.index, spec.sensor_size[0])
                continue
            paths = list(dict.fromkeys(s.path for s in samples))  # a file cut in several: once
            for path in _spread(paths, SAMPLE_FILES):
                if os.path.getsize(path) == 0:  # a reader finds no events in it, and no error either
                    raise ValueError(f"{path}: empty (0 bytes), not a recording")
                read_events(path, sensor_size=tuple(spec.sensor_size))
    except (OSError, ValueError) as e:
        return " ".join(str(e).split())
    return None


def _unpack(root: Path, a: Archive, path: Path, limits: Limits, keep: bool, log) -> None:
    log(f"  unpacking {path.name} ...")
    made = extract_archive(path, root, limits, require=a.holds)
    atomic_write_text(_stamp(root, a), a.md5 + "\n")
    if not keep:
        path.unlink()
    log(f"  {path.name}: unpacked {', '.join(p.name for p in made)}")


def download_event_dataset(spec: DatasetSpec | str, root: str | Path | None = None, keep_archives: bool = False,
                           limits: Limits = Limits(), timeout: float = 30.0, progress: bool | None = None,
                           log=print) -> Path:
    """Fetch, check and unpack every archive of the event dataset whose record (or name) is ``spec`` into its
    folder; returns the folder.

    Already unpacked archives (stamped) are skipped; a ``.part`` from an interrupted transfer is resumed.
    The archives are the record's (``DatasetSpec.archives``; tests point their URLs at a local
    server).  A dataset that needs a browser (``DatasetSpec.manual``) raises ``FileNotFoundError``
    with :func:`manual_steps` unless its archives are already in the folder.  Download failures
    raise ``OSError`` naming every URL tried; an archive without the members the record says it
    holds is refused before it is unpacked (``ArchiveError``), and a folder where the loaders then
    do not find both splits is a ``ValueError`` saying why.
    """
    spec = as_dataset(spec)
    name = spec.name
    if not spec.is_event:
        raise ValueError(f"{name} is a static dataset: plif downloads it when it is first loaded "
                         f"(plif data prepare {name})")
    if not spec.archives:
        raise ValueError(f"no download known for {name}")
    folder = dataset_root(spec, root)
    manual = spec.manual is not None
    todo = [a for a in spec.archives if not _done(folder, a)]
    if not todo:
        why = _loaders_miss(spec, folder)
        if why:
            raise ValueError(f"{name}: the archives were unpacked in {folder}, but the loaders do not find the dataset "
                             f"there now ({why}); remove {folder / _STAMPS} to unpack them again")
        log(f"{name}: already downloaded and unpacked in {folder}")
        return folder
    if len(todo) == len(spec.archives) and _loaders_miss(spec, folder) is None:
        log(f"{name}: already in {folder} (unpacked by hand); nothing to download")
        return folder
    if manual and not all((folder / a.filename).is_file() for a in todo):
        raise FileNotFoundError(manual_steps(spec, root))
    folder.mkdir(parents=True, exist_ok=True)
    log(f"{name}: {len(todo)} of {len(spec.archives)} archives to {'check' if manual else 'fetch'} and unpack into {folder}")
    for i, a in enumerate(todo, 1):
        path = folder / a.filename
        if manual:
            got = file_md5(path)
            if got != a.md5:
                raise ValueError(f"{path}: md5 {got} != expected {a.md5} (incomplete or a different file; "
                                 f"download it again)")
        elif not (path.is_file() and file_md5(path) == a.md5):
            log(f"[{i}/{len(todo)}] {a.filename} <- {a.urls[0]}")
            try:
                download_file(list(a.urls), path, a.md5, timeout=timeout, progress=progress)
            except OSError as e:
                raise OSError(f"{name}: could not download {a.filename}: {e}. Run the same command again to "
                              f"resume, or put the file (md5 {a.md5}) into {folder}/ yourself") from None
        _unpack(folder, a, path, limits, keep_archives, log)
    why = _loaders_miss(spec, folder)
    if why:
        raise ValueError(f"{name}: every archive unpacked into {folder}, but the loaders do not find the dataset ({why})")
    log(f"{name}: ready in {folder}")
    return folder
