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
        raise ValueError(f"{p}: file name has no number to order the CIFAR10-DVS split by")
    return int(found[-1])


def _first_dir(root: Path, candidates: list[str], must_have: str, name: str) -> Path:
    for c in candidates:
        d = root / c if c else root
        if (d / must_have).exists():
            return d
    tried = ", ".join(str(root / c) if c else str(root) for c in candidates)
    raise FileNotFoundError(f"{name}: no '{must_have}' found under any of: {tried}.\n"
                            f"{DATASETS[name].layout}, and pass --data-dir (or --root for plif data prepare).")


def _nmnist(root: Path, train: bool) -> list[EventSample]:
    split = "Train" if train else "Test"
    base = _first_dir(root, ["", "NMNIST", "nmnist", "N-MNIST"], split, "nmnist")
    samples = []
    for digit in range(10):
        d = base / split / str(digit)
        if not d.is_dir():
            raise FileNotFoundError(f"nmnist: missing class folder {d} (expected {split}/0..9/*.bin)")
        files = sorted(d.glob("*.bin"), key=lambda p: (len(p.stem), p.stem))
        samples += [EventSample(str(f), digit) for f in files]
    return samples


def _cifar10_dvs(root: Path, train: bool, train_fraction: float = 0.9) -> list[EventSample]:
    base = _first_dir(root, ["", "CIFAR10-DVS", "cifar10-dvs", "CIFAR10DVS"], "airplane", "cifar10-dvs")
    samples = []
    for label, cls in enumerate(CIFAR10_CLASSES):
        d = base / cls
        files = [f for f in d.iterdir() if f.is_file() and f.suffix in (".aedat", ".aedat4")] if d.is_dir() else []
        if not files:
            raise FileNotFoundError(f"cifar10-dvs: no .aedat/.aedat4 files in class folder {d}")
        files.sort(key=_number)
        n_train = int(round(train_fraction * len(files)))  # 900 of 1000: the paper's split
        chosen = files[:n_train] if train else files[n_train:]
        samples += [EventSample(str(f), label) for f in chosen]
    return samples


def _dvs128_gesture(root: Path, train: bool) -> list[EventSample]:
    lst = "trials_to_train.txt" if train else "trials_to_test.txt"
    base = _first_dir(root, ["", "DvsGesture", "dvs128-gesture", "DVS128Gesture"], lst, "dvs128-gesture")
    samples = []
    for rec in read_trials(base / lst):
        path = base / rec
        labels_csv = base / (path.stem + "_labels.csv")
        if not path.is_file():
            raise FileNotFoundError(f"dvs128-gesture: {base / lst} lists {rec}, but {path} is missing")
        for row in read_gesture_labels(labels_csv):
            samples.append(EventSample(str(path), int(row["cls"]) - 1, int(row["start"]), int(row["end"])))
    return samples


_LISTERS = {"nmnist": _nmnist, "cifar10-dvs": _cifar10_dvs, "dvs128-gesture": _dvs128_gesture}


def list_samples(name: str, root: str | Path, train: bool, **options) -> list[EventSample]:
    """Every sample of one split, in a fixed order (class, then file number / trial list order).

    ``root`` is the dataset folder or its parent.  ``options``: ``train_fraction`` for
    CIFAR10-DVS (default 0.9: the first 900 files of each class by file number train, the last
    100 test, as in the paper; the dataset has no official split).
    """
    if name not in _LISTERS:
        raise ValueError(f"unknown event dataset {name!r}; known: {sorted(_LISTERS)}")
    return _LISTERS[name](Path(root).expanduser(), train, **options)
