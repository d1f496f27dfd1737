"""Static image datasets of the paper: MNIST, Fashion-MNIST, CIFAR-10, loaded whole into memory.

``load_static(spec, root, train)`` (``spec``: the dataset's record, ``get_dataset("mnist")``) returns
``images uint8 [N, C, H, W]`` and ``labels int64 [N]``.
Files are looked up in ``root``, ``root/<name>/`` and ``root/<name>/raw/`` (gzip or not; the
content decides), downloaded with checksums when missing and the network allows, and otherwise
a ``FileNotFoundError`` says which files to put where.
"""
from __future__ import annotations

import io
import pickle
import tarfile
from pathlib import Path

import numpy as np
import torch

from ..catalog import DatasetSpec, as_dataset, dataset_folder, default_root
from .download import download_file
from .idx import read_idx

__all__ = ["load_static", "default_root"]

FASHION_SYSTEM_DIR = Path("/usr/share/datasets/fashion-mnist")  # Debian: dataset-fashion-mnist


CIFAR_DIR = "cifar-10-batches-py"
CIFAR_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR_TEST = ("test_batch",)


def _candidate_dirs(entry: DatasetSpec, root: Path) -> list[Path]:
    dirs = [root]
    for name in entry.search_dirs:
        dirs += [root / name, root / name / "raw"]
    return dirs


def _find_idx(dirs: list[Path], gz_name: str) -> Path | None:
    for d in dirs:
        for fname in (gz_name, gz_name[:-3]):  # gz or unpacked: the reader looks at the content
            if (d / fname).is_file():
                return d / fname
    return None


def _missing(entry: DatasetSpec, root: Path, names: list[str], why: str) -> FileNotFoundError:
    urls = "\n".join(f"  {entry.urls[0]}{n}" for n in names)
    return FileNotFoundError(
        f"{entry.name}: missing {', '.join(names)} ({why}).\n"
        f"Put these files (gzip or unpacked) in {root} or {root / entry.name}/:\n{urls}")


def _load_idx_dataset(entry: DatasetSpec, root: Path, train: bool, download: bool,
                      system: bool) -> tuple[np.ndarray, np.ndarray]:
    split = "train" if train else "test"
    names = [entry.files[f"{split}_images"], entry.files[f"{split}_labels"]]
    dirs = _candidate_dirs(entry, root)
    if entry.name == "fashion-mnist" and system:
        dirs.insert(0, FASHION_SYSTEM_DIR)
    paths = [_find_idx(dirs, n) for n in names]
    if None in paths:
        # every file of the dataset that is missing, the other split's too: a run needs them all, and one
        # message naming each (with why its download failed) beats a second failure after the first fix
        missing = [n for n in entry.files.values() if _find_idx(dirs, n) is None]
        if not download:
            raise _missing(entry, root, missing, "download=False")
        failed = {}
        for n in missing:
            try:
                download_file([u + n for u in entry.urls], root / entry.name / n, entry.md5[n])
            except OSError as e:  # names the URL, so the file, and why
                failed[n] = str(e)
        if failed:
            raise _missing(entry, root, list(failed), "download failed: " + "; ".join(failed.values()))
        paths = [_find_idx(dirs, n) for n in names]
    images = read_idx(paths[0], expect_type=0x08, expect_ndim=3)
    labels = read_idx(paths[1], expect_type=0x08, expect_ndim=1)
    _refuse_empty(len(images), entry, split, paths[0])
    _check_labels(labels, entry, paths[1], header=8)
    if len(images) != len(labels):
        raise ValueError(f"{paths[0]} has {len(images)} images but {paths[1]} has {len(labels)} labels")
    return images[:, None], labels


def _refuse_empty(n: int, entry: DatasetSpec, split: str, where) -> None:
    """A split of 0 images passes every format check (a valid header for none); training on it, or
    testing on it, would say nothing true.  Refused, naming the file."""
    if n == 0:
        raise ValueError(f"{where}: 0 images (a valid header for none): an empty {split} split of {entry.name} "
                         "is refused; get the complete files")


def _check_labels(labels: np.ndarray, entry: DatasetSpec, where, header: int | None = None) -> None:
    """A well-formed label file whose values are not classes of the dataset is refused: it would
    train silently on wrong targets.  The error names the file and the first bad index."""
    bad = np.flatnonzero((labels < 0) | (labels >= entry.num_classes))
    if len(bad):
        i = int(bad[0])
        at = f" (IDX byte offset {header + i}, after any gunzip)" if header is not None else ""
        raise ValueError(f"{where}: label {int(labels[i])} at index {i}{at} is outside the {entry.num_classes} "
                         f"classes 0..{entry.num_classes - 1} of {entry.name} ({len(bad)} bad labels in all)")


class _ArrayUnpickler(pickle.Unpickler):
    """Pickle loader that only rebuilds numpy arrays: CIFAR batches need nothing else, and a
    general ``pickle.load`` would run whatever callable a tampered file names."""

    ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
               ("numpy", "ndarray"), ("numpy", "dtype")}

    def find_class(self, module, name):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a CIFAR batch")
        return super().find_class(module, name)


def _parse_cifar_batch(blob: bytes, where: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        d = _ArrayUnpickler(io.BytesIO(blob), encoding="bytes").load()
        data = np.asarray(d[b"data"], dtype=np.uint8)
        labels = np.asarray(d[b"labels"], dtype=np.int64)
    except (pickle.UnpicklingError, EOFError, KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{where}: not a CIFAR-10 python batch ({type(e).__name__}: {e})") from None
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(labels) != len(data):
        raise ValueError(f"{where}: data {data.shape} / labels {labels.shape}, expected [N, 3072] / [N]")
    return data.reshape(-1, 3, 32, 32), labels  # each row: 1024 R, 1024 G, 1024 B, row-major


def _find_cifar(entry: DatasetSpec, root: Path) -> tuple[str, Path] | None:
    for d in _candidate_dirs(entry, root):
        if (d / CIFAR_DIR / "test_batch").is_file():
            return "dir", d / CIFAR_DIR
        if (d / entry.files["archive"]).is_file():
            return "tar", d / entry.files["archive"]
    return None


CIFAR_BATCH_MAX = 64 << 20  # bytes; one python batch of 10000 images is 31,035,704


def _read_cifar_tar(path: Path, batches: tuple[str, ...]) -> list[tuple[np.ndarray, np.ndarray]]:
    parts = []
    try:
        with tarfile.open(path, "r:gz") as tar:
            for b in batches:
                member = f"{CIFAR_DIR}/{b}"
                try:
                    f = tar.extractfile(member)
                except KeyError:
                    f = None
                if f is None:
                    raise ValueError(f"{path}: archive has no file {member}")
                size = tar.getmember(member).size
                if size > CIFAR_BATCH_MAX:  # a batch is ~31 MB; a bomb of zeros would be read whole
                    raise ValueError(f"{path}: {member} claims {size} bytes, more than a CIFAR-10 batch "
                                     f"(at most {CIFAR_BATCH_MAX}): not the CIFAR-10 archive")
                parts.append(_parse_cifar_batch(f.read(), f"{path}:{member}"))
    except (tarfile.TarError, EOFError, OSError) as e:
        raise ValueError(f"{path}: corrupt or truncated archive ({e})") from None
    return parts


def _load_cifar(entry: DatasetSpec, root: Path, train: bool, download: bool,
                system: bool) -> tuple[np.ndarray, np.ndarray]:
    found = _find_cifar(entry, root)
    archive = entry.files["archive"]
    if found is None:
        why = "download=False"
        if download:
            try:
                download_file([u + archive for u in entry.urls], root / entry.name / archive, entry.md5[archive])
            except OSError as e:
                why = f"download failed: {e}"
            found = _find_cifar(entry, root)
        if found is None:
            raise FileNotFoundError(
                f"{entry.name}: missing {archive} ({why}).\nPut {entry.urls[0]}{archive} in {root} or "
                f"{root / entry.name}/, or its extracted folder {CIFAR_DIR}/ (data_batch_1..5, test_batch) there.")
    kind, path = found
    batches = CIFAR_TRAIN if train else CIFAR_TEST
    if kind == "tar":
        parts = _read_cifar_tar(path, batches)
    else:
        parts = []
        for b in batches:
            if not (path / b).is_file():
                raise FileNotFoundError(f"{path / b}: CIFAR-10 batch missing")
            parts.append(_parse_cifar_batch((path / b).read_bytes(), str(path / b)))
    images, labels = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    _refuse_empty(len(images), entry, "train" if train else "test", f"{path} ({', '.join(batches)})")
    _check_labels(labels, entry, f"{entry.name} ({'train' if train else 'test'} split)")
    return images, labels


_LOADERS = {"idx": _load_idx_dataset, "cifar-python": _load_cifar}  # DatasetSpec.loader -> reader


def load_static(spec: DatasetSpec | str, root: str | Path | None = None, train: bool = True,
                download: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Load a whole split: ``images uint8 [N, C, H, W]`` (raw 0..255), ``labels int64 [N]``.

    ``spec`` is the record of a static dataset (:data:`plif.catalog.DATASETS`) or its name.
    ``root=None`` means ``default_root()``, and for Fashion-MNIST the Debian folder
    ``/usr/share/datasets/fashion-mnist`` is searched first.
    Missing files are downloaded (md5-checked) unless ``download=False``; if that is impossible a
    ``FileNotFoundError`` names the files and folder.  Corrupt files raise ``ValueError``.
    """
    entry = as_dataset(spec, events=False)
    system = root is None
    root = default_root() if root is None else dataset_folder(root)
    images, labels = _LOADERS[entry.loader](entry, root, train, download, system)
    if images.shape[1:] != entry.input_shape:
        raise ValueError(f"{entry.name}: images have shape {images.shape[1:]}, expected {entry.input_shape}")
    return torch.from_numpy(np.ascontiguousarray(images)), torch.from_numpy(labels.astype(np.int64))
