"""Event datasets of the paper: where the files are, what each sample is, which split it belongs to.

A sample is one file, one ``[start, end)`` cut of a file (DVS128 Gesture), or one entry of a file
that holds many (SHD / SSC's HDF5: its ``index``).  Nothing here reads events (an HDF5 split's
labels excepted); :mod:`.cache` turns samples into frames.
"""
from __future__ import annotations

import itertools
import math
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ...catalog import CIFAR10_CLASSES, DatasetSpec, as_dataset, dataset_folder
from .gesture import read_gesture_labels, read_trials

__all__ = ["EventSample", "EventDataset", "list_samples", "CIFAR10_CLASSES"]


@dataclass(frozen=True)
class EventSample:
    """``path``: event file; ``label``: class index 0..C-1; ``start``/``end``: µs cut or None;
    ``index``: the sample's entry in a file that holds many (SHD / SSC's HDF5), else None."""

    path: str
    label: int
    start: int | None = None
    end: int | None = None
    index: int | None = None


EventDataset = DatasetSpec  # the description of one event dataset (sensor_size, num_classes, T, sizes, ...)


def _number(p: Path) -> int:
    """The integer that ends a file name (``cifar10_cat_417.aedat`` -> 417): the paper's file order.
    Only a trailing number counts: ``cifar10_cat_x.aedat`` has none (the 10 of "cifar10" is not one)."""
    found = re.search(r"(\d+)$", p.stem)
    if not found:
        raise ValueError(f"{p}: file name does not end in a number (like cifar10_cat_417.aedat) to order the "
                         "split by")
    return int(found.group(1))


def _class_files(d: Path, suffixes: tuple[str, ...], name: str, number) -> list[Path]:
    """The recordings of one class folder in file-number order: the one rule for every dataset
    with a folder per class.  A missing or empty class folder, and two files with the same number
    (``cat_01`` beside ``cat_1``, or ``cat_1.aedat`` beside ``cat_1.aedat4``), are refused."""
    what = "/".join(f"*{x}" for x in suffixes)
    if not d.is_dir():
        raise FileNotFoundError(f"{name}: missing class folder {d} (expected {what} files in it)")
    files = [f for f in d.iterdir() if f.suffix in suffixes]
    odd = next((f for f in files if not f.is_file()), None)
    if odd is not None:  # a folder, a dangling link, a pipe: never silently skipped
        kind = "a dangling link" if odd.is_symlink() and not odd.exists() else "not a regular file"
        raise ValueError(f"{name}: {odd} is {kind}; a class folder holds recordings only")
    if not files:
        raise FileNotFoundError(f"{name}: no {what} files in class folder {d}: an empty class is refused")
    seen: dict[int, Path] = {}
    for f in files:
        k = number(f)
        if k in seen:
            a, b = sorted([seen[k].name, f.name])
            k = k if isinstance(k, int) else k[1]
            raise ValueError(f"{name}: {d} holds {a} and {b}, both number {k}: a duplicate recording? "
                             "keep one")
        seen[k] = f
    return [seen[k] for k in sorted(seen)]


def _real_paths(paths) -> list[str]:
    """``os.path.realpath`` of each path, with each folder resolved once: a file that is not a link is
    its folder's real path and its name (one ``lstat`` a file, not one per component of its path:
    N-MNIST's 70,000 recordings are listed on every training start)."""
    folders: dict[str, str] = {}
    out = []
    for p in map(str, paths):
        if os.path.islink(p):
            out.append(os.path.realpath(p))
            continue
        head, tail = os.path.split(p)
        if head not in folders:
            folders[head] = os.path.realpath(head)
        out.append(os.path.join(folders[head], tail))
    return out


def _refuse_shared(name: str, these: list[Path], others: list[Path], what: str) -> None:
    """Refuse a recording listed twice in one split, or in both splits (a train/test leak)."""
    real = _real_paths(these)
    twice = next((p for p, n in Counter(real).items() if n > 1), None)
    if twice:
        raise ValueError(f"{name}: {twice} is listed twice in {what}: every recording is one sample source once")
    leak = set(real) & set(_real_paths(others))
    if leak:
        raise ValueError(f"{name}: {sorted(leak)[0]} is in both the train and the test split ({len(leak)} such): "
                         "a train/test leak")


def _first_dir(root: Path, d: DatasetSpec, must_have: str) -> Path:
    candidates = ["", *d.search_dirs]
    for c in candidates:
        base = root / c if c else root
        if (base / must_have).exists():
            return base
    tried = ", ".join(str(root / c) if c else str(root) for c in candidates)
    raise FileNotFoundError(f"{d.name}: no '{must_have}' found under any of: {tried}.\n"
                            f"{d.layout}, and pass --data-dir.")


def _file_number(p: Path) -> tuple:
    """Numbered files (N-MNIST's ``00017.bin``) by number, then any other name by name."""
    return (0, int(p.stem), "") if p.stem.isdigit() else (1, 0, p.stem)


def _split_folders(d: DatasetSpec, root: Path, train: bool) -> list[EventSample]:
    """``Train/<class>/`` and ``Test/<class>/`` (N-MNIST; DVS-Lip's ``train`` / ``test``, the record's
    ``split_dirs``): the official split."""
    split, other = d.split_dirs if train else d.split_dirs[::-1]
    base = _first_dir(root, d, split)
    samples, files = [], []
    for label, cls in enumerate(d.classes):
        chosen = _class_files(base / split / cls, d.suffixes, d.name, _file_number)
        files += chosen
        samples += [EventSample(str(f), label) for f in chosen]
    # a Test class folder that is a link to (or holds links into) Train leaks the test set
    others = [f for f in (base / other).glob("*/*") if f.suffix in d.suffixes] if (base / other).is_dir() else []
    _refuse_shared(d.name, files, others, f"{base / split}")
    return samples


def train_count(n: int, fraction: float) -> int:
    """How many of a class's ``n`` files train: ``ceil(fraction * n)``, SpikingJelly's
    ``split_to_train_test_set`` rule (which the authors' code used): 900 of CIFAR10-DVS's 1000, 43 of
    47, and all of a class below 10 files at 0.9 (5 -> 5/0: that class has no test sample)."""
    return math.ceil(round(fraction * n, 9))  # the rounding keeps float noise (0.55 * 100 = 55.000...01) from adding a file


def _class_folders(d: DatasetSpec, root: Path, train: bool, train_fraction: float | None = None) -> list[EventSample]:
    """One folder per class, no official split (CIFAR10-DVS, N-Caltech101): in each class the first
    :func:`train_count` of the files by file number train, the rest test (the paper's CIFAR10-DVS split)."""
    fraction = d.train_fraction if train_fraction is None else train_fraction
    base = _first_dir(root, d, d.classes[0])
    samples, sizes = [], {}
    for label, cls in enumerate(d.classes):
        files = _class_files(base / cls, d.suffixes, d.name, _number)
        sizes[cls] = len(files)
        n_train = train_count(len(files), fraction)
        chosen = files[:n_train] if train else files[n_train:]
        samples += [EventSample(str(f), label) for f in chosen]
    if not samples and not train:  # the folders are there: say what the split needs of them
        raise ValueError(f"{d.name}: no test samples under {base}: {_split_rule(fraction, sizes)}")
    return samples


def _split_rule(fraction: float, sizes: dict[str, int]) -> str:
    """Why classes of these ``sizes`` give no test sample at ``fraction``: the class size it needs."""
    biggest = max(sizes, key=sizes.get)
    rule = (f"of each class's n recordings the first ceil({fraction:g}·n) by file number train, the rest test; "
            f"the largest class here, {biggest}, has {sizes[biggest]}")
    if fraction >= 1:
        return f"{rule}, and at a train fraction of {fraction:g} no class gives a test sample"
    start = max(1, int(1 / (1 - fraction)) - 1)  # ceil(f n) < n from about n = 1 / (1 - f) on
    need = next(n for n in itertools.count(start) if train_count(n, fraction) < n)
    return f"{rule}, and a class needs at least {need} recordings to give one test sample"


def _gesture_trials(d: DatasetSpec, root: Path, train: bool) -> list[EventSample]:
    """DVS128 Gesture: the trials listed in ``trials_to_train.txt`` / ``trials_to_test.txt``, each cut
    into one sample per gesture by its ``_labels.csv``."""
    lst, other = ("trials_to_train.txt", "trials_to_test.txt") if train else ("trials_to_test.txt", "trials_to_train.txt")
    base = _first_dir(root, d, lst)
    recs = read_trials(base / lst)
    others = read_trials(base / other) if (base / other).is_file() else []
    _refuse_shared(d.name, [base / r for r in recs], [base / r for r in others], str(base / lst))
    samples = []
    for rec in recs:
        path = base / rec
        labels_csv = base / (path.stem + "_labels.csv")
        if not path.is_file():
            raise FileNotFoundError(f"{d.name}: {base / lst} lists {rec}, but {path} is missing")
        if not labels_csv.is_file():
            raise FileNotFoundError(f"{d.name}: {base / lst} lists {rec}, but its label file {labels_csv} "
                                    "is missing")
        _check_version(path, b"#!AER-DAT3.1", f"{d.name} recordings are AEDAT 3.1")
        for row in read_gesture_labels(labels_csv):
            samples.append(EventSample(str(path), int(row["cls"]) - 1, int(row["start"]), int(row["end"])))
    return samples


def _check_version(path: Path, magic: bytes, what: str) -> None:
    """Refuse a recording of another format by its first line, before any event is read (an
    AEDAT 2.0 file given as a Gesture recording was read as an 'empty' one)."""
    with open(path, "rb") as f:
        head = f.read(64)
    if not head.startswith(magic):
        first = head.split(b"\n", 1)[0].strip().decode("latin-1", "replace")[:40]
        found = f"its first line is {first!r}" if first.startswith("#!AER-DAT") else "it has no AEDAT version line"
        raise ValueError(f"{path}: {what} (a '{magic.decode()}' first line); {found}")


def _hdf5_splits(d: DatasetSpec, root: Path, train: bool) -> list[EventSample]:
    """One HDF5 spike file per split (SHD, SSC: ``d.files["train"]`` / ``["test"]``), each of its
    entries a sample; the labels are read (and checked against the classes) here."""
    from .spike_h5 import read_spike_labels

    name = d.files["train" if train else "test"]
    path = _first_dir(root, d, name) / name
    labels = read_spike_labels(path, d.num_classes)
    return [EventSample(str(path), int(y), index=i) for i, y in enumerate(labels)]


# DatasetSpec.loader -> lister: a dataset laid out like another needs only its record
LISTERS = {"split-folders": _split_folders, "class-folders": _class_folders, "gesture-trials": _gesture_trials,
           "hdf5-splits": _hdf5_splits}


def list_samples(spec: DatasetSpec | str, root: str | Path, train: bool, **options) -> list[EventSample]:
    """Every sample of one split of the event dataset whose record (or name) is ``spec``, in a fixed order
    (class, then file number / trial list order).

    ``root`` is the dataset folder or its parent.  ``options``: ``train_fraction`` for datasets
    without an official split (CIFAR10-DVS and N-Caltech101, default 0.9: the first 900 files of
    each CIFAR10-DVS class by file number train, the last 100 test, as in the paper).
    """
    d = as_dataset(spec, events=True)
    samples = LISTERS[d.loader](d, dataset_folder(root), train, **options)
    if not samples:
        raise ValueError(f"{d.name}: no {'train' if train else 'test'} samples under {root} ({d.layout})")
    return samples
