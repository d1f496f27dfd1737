"""Any Tonic dataset a user has installed, through plif's exact frames and a cache that is never stale.

``TonicFrames(dataset, T)`` takes a Tonic dataset object (``tonic.datasets.NMNIST("data")``, or any
object with its interface: ``len()``, ``dataset[i] -> (events, target)`` with ``events`` a structured
array with fields ``x``, ``y``, ``t``, ``p``, and ``sensor_size`` in Tonic's ``(W, H, P)`` order) and
gives ``(frames [T, 2, H, W] float32, label)`` per sample, integrated by plif's own code
(:func:`plif.data.frames.events_to_frames`, the paper's integration, ``split`` ``"count"`` or
``"time"``).  Tonic itself is not imported: plif reads what the dataset object returns.

    import tonic
    from plif.data.tonic_dataset import TonicFrames
    train = TonicFrames(tonic.datasets.NMNIST("data", train=True), T=10)   # a Python hook, no CLI flag:
    frames, label = train[0]                                             # frames [10, 2, 34, 34]

Why a hook and not ``plif train --dataset tonic:NAME``: a plif dataset is one record of
:mod:`plif.catalog` (its T, networks, files, md5s, splits and accuracies, declared once); a Tonic
dataset brings none of these, so it is read here, through the same integration and a cache kept as
safely as the event datasets' (:mod:`plif.data.events.cache`).

- Events are taken as they come: a dataset built with Tonic's ``transform``, ``target_transform``
  or ``transforms`` is refused in one line (they would change the events before plif sees them);
  none is needed.
- Where Tonic's conventions differ from plif's, one line each says so (:func:`tonic_conventions`):
  Tonic's sensor is ``(W, H, P)``, plif's ``(H, W)``; a sensor that differs from plif's record of
  the same dataset; plif's own reader flipping x where Tonic's does not; ``p`` as -1/1 (taken as
  OFF 0 / ON 1; 0/1 and bool are plif's).
- The cache (under ``tonic/`` in ``cache_dir``, default ``$PLIF_DATA_ROOT/frames``, apart from the event
  datasets' caches that ``plif data verify`` and ``clean`` read): one folder per dataset class, T,
  split, sensor and samples, holding ``frames.npy`` ``[N, T, 2, H, W]`` (counts, the smallest
  integer type that holds them), ``labels.npy`` and, written last, ``meta.json``.  Its key hashes
  each recording file's fingerprint where the dataset lists its files (``dataset.data``, one path
  per sample, as Tonic's file-per-recording datasets do; an edited file rebuilds it), else the
  events' bytes (read in full each time: only the integration is saved).  Every file is written
  atomically: an interrupted build leaves no cache that loads.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from ..atomic import atomic_save_npy, atomic_write_bytes
from ..catalog import DATASETS, default_root
from .events.cache import count_dtype
from .events.fingerprint import fingerprint, same_content
from .events.types import make_events
from .frames import SPLITS, check_frame_shape, events_to_frames

__all__ = ["TonicFrames", "tonic_conventions", "tonic_events", "TONIC_NAMES"]

TONIC_NAMES = {"NMNIST": "nmnist", "DVSGesture": "dvs128-gesture", "NCALTECH101": "ncaltech101",
               "CIFAR10DVS": "cifar10-dvs"}
"""Tonic's dataset class -> plif's record of the same dataset, whose conventions a Tonic one is compared with."""

TONIC_CACHE_VERSION = 1  # bump when what a cache holds changes
_TRANSFORMS = ("transform", "target_transform", "transforms")


def tonic_events(events, where: str = "events") -> tuple[np.ndarray, bool]:
    """``(plif's events [N] (t, x, y, p), whether p was -1/1)`` of a Tonic structured array (fields
    ``x``, ``y``, ``t``, ``p`` in any order, more ignored; ``p`` 0/1, bool or -1/1); anything else is a
    one-line ``ValueError`` naming ``where``."""
    names = getattr(getattr(events, "dtype", None), "names", None) or ()
    missing = [f for f in ("x", "y", "t", "p") if f not in names]
    if missing:
        raise ValueError(f"{where}: a Tonic event array has the fields x, y, t, p (a structured numpy array); "
                         f"missing {', '.join(missing)} (has {', '.join(names) or type(events).__name__})")
    p = np.asarray(events["p"]).astype(np.int64)
    signed = bool(p.size and p.min() < 0)
    if signed:
        if not np.isin(p, (-1, 1)).all():
            raise ValueError(f"{where}: polarity values must be 0/1, bool or -1/1, found {int(p.min())} to "
                             f"{int(p.max())}")
        p = (p > 0).astype(np.int64)
    elif p.size and p.max() > 1:
        raise ValueError(f"{where}: polarity values must be 0/1, bool or -1/1, found {int(p.min())} to {int(p.max())}")
    for f in ("x", "y"):
        v = np.asarray(events[f])
        if v.size and (v.min() < 0 or v.max() > np.iinfo(np.uint16).max):
            raise ValueError(f"{where}: {f} from {v.min()} to {v.max()}: coordinates are pixels, 0 to 65535")
    return make_events(np.asarray(events["t"]).astype(np.int64), events["x"], events["y"], p), signed


def _sensor(dataset, sensor_size) -> tuple[tuple[int, int], int | None]:
    """``((H, W), P)`` from ``sensor_size`` (plif's ``(H, W)``) or the dataset's Tonic ``(W, H, P)``."""
    if sensor_size is not None:
        if len(sensor_size) != 2 or not all(isinstance(v, (int, np.integer)) and v >= 1 for v in sensor_size):
            raise ValueError(f"sensor_size: plif's (H, W), two integers >= 1, got {sensor_size!r}")
        return (int(sensor_size[0]), int(sensor_size[1])), None
    tonic = getattr(dataset, "sensor_size", None)
    if tonic is None:
        raise ValueError(f"{type(dataset).__name__} has no sensor_size (Tonic gives none where recordings differ in "
                         "size): pass sensor_size=(H, W), the largest recording's")
    if len(tonic) != 3 or not all(isinstance(v, (int, np.integer)) and v >= 1 for v in tonic):
        raise ValueError(f"{type(dataset).__name__}.sensor_size: Tonic's (W, H, P), three integers >= 1, got {tonic!r}")
    w, h, p = (int(v) for v in tonic)
    if p > 2:
        raise ValueError(f"{type(dataset).__name__}.sensor_size {tuple(tonic)}: {p} polarities; plif's frames hold 2 "
                         "(OFF, ON)")
    return (h, w), p


def tonic_conventions(dataset, sensor_hw: tuple[int, int], polarities: int | None) -> list[str]:
    """One line per convention of the Tonic ``dataset`` that differs from plif's (the module's docstring)."""
    name = type(dataset).__name__
    lines = []
    tonic = getattr(dataset, "sensor_size", None)
    if polarities is not None and sensor_hw[0] != sensor_hw[1]:
        lines.append(f"{name}: Tonic's sensor_size {tuple(int(v) for v in tonic)} is (W, H, P); plif's frames are "
                     f"[T, 2, H, W] with (H, W) = {sensor_hw}")
    if polarities == 1:
        lines.append(f"{name}: Tonic's sensor has 1 polarity; plif's frames hold 2 (OFF, ON), its events land in "
                     "channel p")
    record = DATASETS.get(TONIC_NAMES.get(name, ""))
    if record is not None and tuple(record.sensor_size) != tuple(sensor_hw):
        lines.append(f"{name}: sensor (H, W) = {sensor_hw}, plif's {record.name} record has {record.sensor_size}")
    if record is not None and "flip_x" in record.reader_options:
        lines.append(f"{name}: plif's own {record.name} reader flips x (flip_x); Tonic's events are taken as they "
                     f"come, so these frames are the mirror image of plif's {record.name} frames")
    return lines


def _files(dataset) -> list[str] | None:
    """One recording file per sample, where the dataset lists them (``dataset.data``), else None."""
    data = getattr(dataset, "data", None)
    if not isinstance(data, (list, tuple)) or len(data) != len(dataset):
        return None
    if not all(isinstance(p, (str, os.PathLike)) and os.path.isfile(p) for p in data):
        return None
    return [os.path.abspath(p) for p in data]


class TonicFrames:
    """A Tonic dataset as plif's frames: ``len()``, ``[i] -> (frames [T, 2, H, W] float32, label int)``,
    ``.frames`` ``[N, T, 2, H, W]`` (counts) and ``.labels`` ``[N]`` int64; ``.notes``: the convention
    lines (:func:`tonic_conventions`), also given to ``log`` once.

    - dataset: the Tonic dataset object (module docstring), built without transforms.
    - T: frames per sample; split: ``"count"`` (the paper) or ``"time"`` (:func:`plif.data.frames.slice_index`).
    - sensor_size: plif's ``(H, W)``; None: the dataset's Tonic ``sensor_size``.
    - cache_dir: the frame caches' folder; this one goes under ``tonic/`` there (None: ``$PLIF_DATA_ROOT/frames``)."""

    def __init__(self, dataset, T: int, split: str = "count", sensor_size=None, cache_dir=None, log=print):
        if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or T < 1:
            raise ValueError(f"T: frames per sample, an integer >= 1, got {T!r}")
        if split not in SPLITS:
            raise ValueError(f"split {split!r}: one of {', '.join(SPLITS)}")
        if not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
            raise TypeError(f"dataset: a Tonic dataset (len(), dataset[i] -> (events, target)), got "
                            f"{type(dataset).__qualname__}")
        given = [a for a in _TRANSFORMS if getattr(dataset, a, None) is not None]
        if given:
            raise ValueError(f"{type(dataset).__name__} was built with {', '.join(given)}=...: plif integrates Tonic's "
                             "raw events itself and applies no Tonic transform; build the dataset without it")
        self.T, self.split = int(T), split
        self.sensor_size, polarities = _sensor(dataset, sensor_size)
        if len(dataset) == 0:
            raise ValueError(f"{type(dataset).__name__}: no samples")
        check_frame_shape(self.T, self.sensor_size, samples=len(dataset), hint="lower T")
        self.notes = tonic_conventions(dataset, self.sensor_size, polarities)
        # a folder of their own: plif data verify / clean read the folders directly under the frame caches' folder
        root = (Path(cache_dir) if cache_dir is not None else default_root() / "frames") / "tonic"
        self.frames, self.labels, signed = _cached(dataset, self.T, split, self.sensor_size, root)
        if signed:
            self.notes.append(f"{type(dataset).__name__}: polarity p is -1/1 in Tonic's events, taken as plif's "
                              "OFF 0 / ON 1")
        for line in self.notes:
            log(line)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[np.ndarray, int]:
        return self.frames[i].astype(np.float32), int(self.labels[i])


def _key(dataset, T: int, split: str, sensor_hw, files) -> tuple[dict, str]:
    """``(params, key)`` of the cache of ``dataset``: the parameters and each recording file's path."""
    params = {"version": TONIC_CACHE_VERSION, "dataset": f"{type(dataset).__module__}.{type(dataset).__qualname__}",
              "T": T, "split": split, "sensor_size": list(sensor_hw), "samples": len(dataset),
              "train": getattr(dataset, "train", None)}
    h = hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode())
    for path in files or ():  # what they hold: meta.json's fingerprints, checked at every load
        h.update(json.dumps(path).encode())
    return params, h.hexdigest()[:16]


def _item(dataset, i: int) -> tuple[np.ndarray, int]:
    """``(events, target)`` of sample ``i`` as the dataset gives it; errors name it."""
    where = f"{type(dataset).__name__}[{i}]"
    item = dataset[i]
    if not isinstance(item, tuple) or len(item) != 2:
        raise ValueError(f"{where}: a Tonic dataset gives (events, target), got {type(item).__name__}")
    events, target = item
    if isinstance(target, bool) or not isinstance(target, (int, np.integer)) or target < 0:
        raise ValueError(f"{where}: target {target!r}: a class index (an integer >= 0); plif reads single-label "
                         "classification datasets")
    return events, int(target)


def _content_key(dataset) -> str:
    """A hash of every sample's events and target, for a dataset that lists no files (all read once)."""
    h = hashlib.sha256()
    for i in range(len(dataset)):
        events, target = _item(dataset, i)
        h.update(hashlib.blake2b(np.ascontiguousarray(events).tobytes(), digest_size=16).digest())
        h.update(str(target).encode())
    return h.hexdigest()[:16]


def _cached(dataset, T: int, split: str, sensor_hw, root: Path) -> tuple[np.ndarray, np.ndarray, bool]:
    files = _files(dataset)
    params, key = _key(dataset, T, split, sensor_hw, files)
    folder = root / f"tonic-{type(dataset).__name__}-T{T}-{split}-{key}"
    if files is None:  # no files to fingerprint: the events' content decides
        folder = root / f"{folder.name}-{_content_key(dataset)}"
    found = _load(folder, params, files)
    if found is not None:
        return found
    return _build(dataset, folder, params, files, T, split, sensor_hw)


def _load(folder: Path, params: dict, files) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """The cache in ``folder`` when it is complete, for ``params``, with every file unchanged; else None."""
    try:
        meta = json.loads((folder / "meta.json").read_text())
        if meta["params"] != json.loads(json.dumps(params, default=str)):
            return None
        if files is not None and not all(same_content(p, meta["sources"][p]) for p in files):
            return None
        frames = np.load(folder / "frames.npy", mmap_mode="r")
        labels = np.load(folder / "labels.npy")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if frames.shape != (params["samples"], params["T"], 2, *params["sensor_size"]) or labels.shape != (len(frames),):
        return None
    if not same_content(folder / "frames.npy", meta["frames"]):  # stat and edges; the whole hash where the stat changed
        return None
    return frames, labels, bool(meta.get("signed_polarity"))


def _build(dataset, folder: Path, params: dict, files, T: int, split: str, sensor_hw
           ) -> tuple[np.ndarray, np.ndarray, bool]:
    """Integrate every sample (plif's :func:`~plif.data.frames.events_to_frames`) and write the cache."""
    n = len(dataset)
    frames = np.zeros((n, T, 2, *sensor_hw), dtype=np.int32)  # counts; the smallest type that holds them below
    labels, signed = np.zeros(n, dtype=np.int64), False
    for i in range(n):
        where = f"{type(dataset).__name__}[{i}]"
        events, labels[i] = _item(dataset, i)
        ev, flipped = tonic_events(events, where)
        signed = signed or flipped
        try:
            frames[i] = events_to_frames(ev, T, sensor_hw, split)
        except ValueError as e:
            raise ValueError(f"{where}: {e} (sensor_size=(H, W) gives another)") from None
    frames = frames.astype(count_dtype(int(frames.max()) if frames.size else 0), copy=False)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "meta.json").unlink(missing_ok=True)  # complete only once meta.json is back
    atomic_save_npy(folder / "frames.npy", frames)
    atomic_save_npy(folder / "labels.npy", labels)
    meta = {"params": json.loads(json.dumps(params, default=str)), "signed_polarity": signed,
            "frames": fingerprint(folder / "frames.npy"),
            "sources": {p: fingerprint(p) for p in files} if files is not None else None}
    atomic_write_bytes(folder / "meta.json", json.dumps(meta, indent=1).encode())
    return frames, labels, signed
