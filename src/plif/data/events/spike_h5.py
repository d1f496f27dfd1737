"""The Heidelberg spiking datasets' HDF5 files (SHD and SSC, Cramer et al. 2020): many samples in one file.

Layout (the published ``shd_train.h5`` ... ``ssc_test.h5``): ``spikes/times`` and ``spikes/units``,
one variable-length array per sample (times in float seconds, units the cochlea channel
``0..699``), and ``labels`` ``[N]`` (the class index); ``extra/`` holds metadata that is not read.

A sample is returned as the event record every reader returns (:data:`.types.EVENT_DTYPE`): ``t``
the time rounded to whole microseconds, ``x`` the channel, ``y`` and ``p`` 0 (a 1-d sensor
without polarity: :func:`plif.data.frames.events_to_frames` with ``sensor_size=(700,)``).

Strict, like every reader here: a file that is not HDF5, a missing or misshapen field, a label
outside ``[0, classes)``, a unit outside ``[0, channels)``, a time that is negative, not finite or
earlier than the one before it (the published files are sorted; an unsorted sample is refused
rather than sorted, since ``count`` slicing follows file order), and times and units of unequal
length are each a one-line :class:`SpikeFileError` naming the file and the field.

``h5py`` is an optional dependency (``pip install 'plif[audio]'``); without it the first read
says so in one line.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .types import EVENT_DTYPE

__all__ = ["SpikeFileError", "FIELDS", "HDF5_MAGIC", "open_spike_file", "read_spike_labels", "read_spike_sample",
           "SpikeFile"]

FIELDS = ("spikes/times", "spikes/units", "labels")
"""The datasets of a spike file the reader needs (``extra/`` is not read)."""

HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"  # the HDF5 superblock signature at offset 0 (files written by h5py)
_MAX_US = 2.0**62 / 1e6  # seconds whose microseconds stay inside int64 (with slicing's headroom)


class SpikeFileError(ValueError):
    """A spike file that is not what the Heidelberg layout promises; the message names file and field."""

    def __init__(self, path, field: str | None, what: str):
        where = f"{path}: {field}: " if field else f"{path}: "
        super().__init__(where + what)
        self.path, self.field, self.what = str(path), field, what


def _h5py():
    try:
        import h5py
    except ImportError:
        raise ImportError("reading SHD / SSC's HDF5 files needs h5py: pip install 'plif[audio]' (or pip install h5py)"
                          ) from None
    return h5py


class SpikeFile:
    """An open spike file whose structure was checked: ``len`` samples, :meth:`labels`, :meth:`events`.
    Use as a context manager (or call :meth:`close`)."""

    def __init__(self, path: str | Path):
        h5py = _h5py()
        self.path = str(path)
        p = Path(path)
        if not p.is_file():
            if p.exists():
                raise SpikeFileError(path, None, "is not a regular file, not an HDF5 spike file")
            raise FileNotFoundError(f"{path}: no such spike file")
        with open(p, "rb") as f:
            head = f.read(len(HDF5_MAGIC))
        if head != HDF5_MAGIC:
            raise SpikeFileError(path, None, f"not an HDF5 file (it starts with {head[:8]!r}, HDF5 with "
                                             f"{HDF5_MAGIC!r}); a damaged or still gzipped download?")
        try:
            self.h5 = h5py.File(p, "r")
        except OSError as e:
            raise SpikeFileError(path, None, f"damaged HDF5 file: {' '.join(str(e).split())}") from None
        try:
            self.times, self.units, self.label_set = (self._dataset(f) for f in FIELDS)
            n = self.label_set.shape[0]
            for name, d in (("spikes/times", self.times), ("spikes/units", self.units)):
                if d.shape[0] != n:
                    raise SpikeFileError(path, name, f"{d.shape[0]} samples, but labels has {n}")
                if h5py.check_vlen_dtype(d.dtype) is None:
                    raise SpikeFileError(path, name, f"holds {d.dtype}, expected one variable-length array per "
                                                     "sample")
            if self.label_set.dtype.kind not in "iu":
                raise SpikeFileError(path, "labels", f"holds {self.label_set.dtype}, expected integer class indices")
            if h5py.check_vlen_dtype(self.times.dtype).kind != "f":
                raise SpikeFileError(path, "spikes/times", "holds no floating-point seconds")
            if h5py.check_vlen_dtype(self.units.dtype).kind not in "iu":
                raise SpikeFileError(path, "spikes/units", "holds no integer channel numbers")
        except BaseException:
            self.h5.close()
            raise

    def _dataset(self, name: str):
        try:
            d = self.h5[name]
        except KeyError:
            raise SpikeFileError(self.path, name, f"missing (a spike file holds {', '.join(FIELDS)})") from None
        except OSError as e:
            raise SpikeFileError(self.path, name, f"unreadable: {' '.join(str(e).split())}") from None
        if not hasattr(d, "shape") or len(d.shape) != 1:
            raise SpikeFileError(self.path, name, "is not a 1-d dataset of one entry per sample")
        return d

    def __len__(self) -> int:
        return int(self.label_set.shape[0])

    def labels(self, num_classes: int) -> np.ndarray:
        """Every sample's class index ``[N]`` int64, each in ``[0, num_classes)``."""
        try:
            y = np.asarray(self.label_set[()], dtype=np.int64)
        except OSError as e:
            raise SpikeFileError(self.path, "labels", f"unreadable: {' '.join(str(e).split())}") from None
        bad = np.flatnonzero((y < 0) | (y >= num_classes))
        if bad.size:
            i = int(bad[0])
            raise SpikeFileError(self.path, "labels", f"label {int(y[i])} of sample {i} is outside [0, {num_classes}) "
                                                      f"({bad.size} such)")
        return y

    def events(self, index: int, channels: int) -> np.ndarray:
        """Sample ``index`` as events ``[N]`` of :data:`EVENT_DTYPE` (t in µs, x the channel, y = p = 0)."""
        field = "spikes/times"
        try:
            times = np.asarray(self.times[index], dtype=np.float64)
            field = "spikes/units"
            units = np.asarray(self.units[index])
        except OSError as e:
            raise SpikeFileError(self.path, f"{field}[{index}]", f"unreadable: {' '.join(str(e).split())}") from None
        return spike_events(times, units, channels, self.path, index)

    def close(self) -> None:
        self.h5.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def spike_events(times: np.ndarray, units: np.ndarray, channels: int, path="<array>", index: int = 0) -> np.ndarray:
    """Check one sample's ``times`` (float seconds) and ``units`` and pack them as events (see the module)."""
    if times.shape != units.shape or times.ndim != 1:
        raise SpikeFileError(path, f"spikes/units[{index}]", f"{units.size} units for {times.size} times")
    out = np.zeros(times.size, dtype=EVENT_DTYPE)
    if times.size == 0:
        return out
    if not np.isfinite(times).all() or times.min() < 0 or times.max() >= _MAX_US:
        i = int(np.flatnonzero(~np.isfinite(times) | (times < 0) | (times >= _MAX_US))[0])
        raise SpikeFileError(path, f"spikes/times[{index}]", f"time {float(times[i]):g} of spike {i} is not a time in seconds "
                                                             "(finite, >= 0)")
    back = np.flatnonzero(times[1:] < times[:-1])
    if back.size:
        i = int(back[0]) + 1
        raise SpikeFileError(path, f"spikes/times[{index}]", f"times go backwards at spike {i} ({float(times[i]):.9g} s after "
                                                             f"{float(times[i - 1]):.9g} s, {back.size} such); the published "
                                                             "files are sorted")
    if units.min() < 0 or units.max() >= channels:
        i = int(np.flatnonzero((units < 0) | (units >= channels))[0])
        raise SpikeFileError(path, f"spikes/units[{index}]", f"unit {int(units[i])} of spike {i} is outside "
                                                             f"[0, {channels})")
    out["t"] = np.rint(times * 1e6).astype(np.int64)
    out["x"] = units
    return out


def open_spike_file(path: str | Path) -> SpikeFile:
    """The spike file at ``path``, its structure checked (see the module)."""
    return SpikeFile(path)


def read_spike_labels(path: str | Path, num_classes: int) -> np.ndarray:
    """Every sample's label ``[N]`` of the spike file at ``path`` (checked to be in ``[0, num_classes)``)."""
    with SpikeFile(path) as f:
        return f.labels(num_classes)


def read_spike_sample(path: str | Path, index: int, channels: int = 700) -> np.ndarray:
    """Sample ``index`` of the spike file at ``path`` as events ``[N]`` (see the module)."""
    with SpikeFile(path) as f:
        if not 0 <= index < len(f):
            raise IndexError(f"{path}: sample {index} of {len(f)}")
        return f.events(index, channels)
