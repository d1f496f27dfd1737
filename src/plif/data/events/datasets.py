"""Event datasets of the paper: where the files are, what each sample is, which split it belongs to.

A sample is one file, or one ``[start, end)`` cut of a file (DVS128 Gesture).  Nothing here
reads events; :mod:`.cache` turns samples into frames.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..catalog import CIFAR10_CLASSES, DATASETS, DatasetSpec
from .gesture import read_gesture_labels, read_trials

__all__ = ["EventSample", "EventDataset", "EVENT_DATASETS", "list_samples", "CIFAR10_CLASSES"]


@dataclass(frozen=True)
class EventSample:
    """``path``: event file; ``label``: class index 0..C-1; ``start``/``end``: µs cut or None."""

    path: str
    label: int
    start: int | None = None
    end: int | None = None


EventDataset = DatasetSpec  # the description of one event dataset (sensor_size, num_classes, T, sizes, ...)
EVENT_DATASETS: dict[str, DatasetSpec] = {n: d for n, d in DATASETS.items() if d.kind == "event"}


def _number(p: Path) -> int:
    """The last integer in a file name (``cifar10_cat_417.aedat`` -> 417): the paper's file order."""
    found = re.findall(r"\d+", p.stem)
    if not found:
        raise ValueError(f"{p}: file name has no number to order the split by")
    return int(found[-1])


def _first_dir(root: Path, d: DatasetSpec, must_have: str) -> Path:
    candidates = ["", *d.search_dirs]
    for c in candidates:
        base = root / c if c else root
        if (base / must_have).exists():
            return base
    tried = ", ".join(str(root / c) if c else str(root) for c in candidates)
    raise FileNotFoundError(f"{d.name}: no '{must_have}' found under any of: {tried}.\n"
                            f"{d.layout}, and pass --data-dir (or --root for plif data prepare).")


def _files(folder: Path, d: DatasetSpec) -> list[Path]:
    return [f for f in folder.iterdir() if f.is_file() and f.suffix in d.suffixes] if folder.is_dir() else []


def _split_folders(d: DatasetSpec, root: Path, train: bool) -> list[EventSample]:
    """``Train/<class>/`` and ``Test/<class>/`` (N-MNIST): the official split."""
    split = "Train" if train else "Test"
    base = _first_dir(root, d, split)
    samples = []
    for label, cls in enumerate(d.classes):
        files = _files(base / split / cls, d)
        if not files:
            raise FileNotFoundError(f"{d.name}: no {'/'.join(d.suffixes)} files in class folder {base / split / cls} "
                                    f"(expected {split}/<class>/ for the classes {', '.join(d.classes[:3])}, ...)")
        files.sort(key=lambda p: (len(p.stem), p.stem))
        samples += [EventSample(str(f), label) for f in files]
    return samples


def _class_folders(d: DatasetSpec, root: Path, train: bool, train_fraction: float | None = None) -> list[EventSample]:
    """One folder per class, no official split (CIFAR10-DVS, N-Caltech101): in each class the first
    ``train_fraction`` of the files by file number train, the rest test (the paper's CIFAR10-DVS split)."""
    fraction = d.train_fraction if train_fraction is None else train_fraction
    base = _first_dir(root, d, d.classes[0])
    samples = []
    for label, cls in enumerate(d.classes):
        files = _files(base / cls, d)
        if not files:
            raise FileNotFoundError(f"{d.name}: no {'/'.join(d.suffixes)} files in class folder {base / cls}")
        files.sort(key=_number)
        n_train = int(round(fraction * len(files)))  # CIFAR10-DVS: 900 of 1000
        chosen = files[:n_train] if train else files[n_train:]
        samples += [EventSample(str(f), label) for f in chosen]
    return samples


def _gesture_trials(d: DatasetSpec, root: Path, train: bool) -> list[EventSample]:
    """DVS128 Gesture: the trials listed in ``trials_to_train.txt`` / ``trials_to_test.txt``, each cut
    into one sample per gesture by its ``_labels.csv``."""
    lst = "trials_to_train.txt" if train else "trials_to_test.txt"
    base = _first_dir(root, d, lst)
    samples = []
    for rec in read_trials(base / lst):
        path = base / rec
        labels_csv = base / (path.stem + "_labels.csv")
        if not path.is_file():
            raise FileNotFoundError(f"{d.name}: {base / lst} lists {rec}, but {path} is missing")
        for row in read_gesture_labels(labels_csv):
            samples.append(EventSample(str(path), int(row["cls"]) - 1, int(row["start"]), int(row["end"])))
    return samples


# DatasetSpec.loader -> lister: a dataset laid out like another needs only its record
LISTERS = {"split-folders": _split_folders, "class-folders": _class_folders, "gesture-trials": _gesture_trials}


def list_samples(name: str, root: str | Path, train: bool, **options) -> list[EventSample]:
    """Every sample of one split, in a fixed order (class, then file number / trial list order).

    ``root`` is the dataset folder or its parent.  ``options``: ``train_fraction`` for datasets
    without an official split (CIFAR10-DVS and N-Caltech101, default 0.9: the first 900 files of
    each CIFAR10-DVS class by file number train, the last 100 test, as in the paper).
    """
    if name not in EVENT_DATASETS:
        raise ValueError(f"unknown event dataset {name!r}; known: {sorted(EVENT_DATASETS)}")
    d = EVENT_DATASETS[name]
    return LISTERS[d.loader](d, Path(root).expanduser(), train, **options)
