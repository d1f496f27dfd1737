"""ASL-DVS's recordings (Bi et al. 2019): MATLAB 5 files holding ``x``, ``y``, ``ts`` and ``pol`` as
column vectors (DAVIS240c, 240 x 180), read with ``scipy.io.loadmat`` (an optional dependency:
``pip install 'plif[mat]'``).

The values are taken as stored: ``x`` the column, ``y`` the row, ``ts`` in microseconds, ``pol`` 1 = ON,
0 = OFF (SpikingJelly rotates the frame by 180 degrees, ``239 - x`` and ``179 - y``; Tonic flips rows as
``180 - y``).  A file that is not MATLAB 5, a missing field, fields of unequal length, a coordinate
that is negative or not whole, a polarity other than 0 / 1 or a time that is not a whole number of
microseconds is an :class:`.types.EventFormatError` naming the file and the field.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .types import EventFormatError, make_events

__all__ = ["MAGIC", "FIELDS", "read_mat_events"]

MAGIC = b"MATLAB 5.0 MAT-file"  # the text every MATLAB 5 (v5 / v6 / v7) file starts with
FIELDS = ("x", "y", "ts", "pol")


def _loadmat():
    try:
        from scipy.io import loadmat
    except ImportError:
        raise ImportError("reading ASL-DVS's .mat recordings needs scipy: pip install 'plif[mat]' (or pip install "
                          "scipy)") from None
    return loadmat


def _whole(path, name: str, v: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The field ``name`` as int64, each value whole and in ``[lo, hi]``."""
    if v.dtype.kind not in "iufb":
        raise EventFormatError(path, 0, f"field {name!r} holds {v.dtype}, expected numbers")
    if v.size and v.dtype.kind == "f" and not (np.isfinite(v).all() and (v == np.round(v)).all()):
        raise EventFormatError(path, 0, f"field {name!r} holds values that are not whole numbers")
    out = v.astype(np.int64)
    if out.size and (out.min() < lo or out.max() > hi):
        bad = int(out[(out < lo) | (out > hi)][0])
        raise EventFormatError(path, 0, f"field {name!r} holds {bad}, outside [{lo}, {hi}]")
    return out


def read_mat_events(path: str | Path) -> np.ndarray:
    """One ASL-DVS recording -> structured events ``[N]`` (fields t, x, y, p; see the module)."""
    loadmat = _loadmat()
    with open(path, "rb") as f:
        head = f.read(len(MAGIC))
    if head != MAGIC:
        raise EventFormatError(path, 0, f"not a MATLAB 5 file (it starts with {head[:12]!r})")
    try:
        m = loadmat(str(path))
    except Exception as e:  # scipy raises ValueError, TypeError, OSError or its MatReadError on damaged files
        raise EventFormatError(path, 0, f"damaged MATLAB file ({type(e).__name__}: {' '.join(str(e).split())})"
                               ) from None
    missing = [f for f in FIELDS if f not in m]
    if missing:
        raise EventFormatError(path, 0, f"field {missing[0]!r} missing (an ASL-DVS recording holds "
                                        f"{', '.join(FIELDS)}; found {', '.join(k for k in m if not k.startswith('__'))})")
    v = {f: np.asarray(m[f]) for f in FIELDS}
    for f, a in v.items():
        if a.ndim > 2 or (a.ndim == 2 and min(a.shape) > 1):
            raise EventFormatError(path, 0, f"field {f!r} is {a.shape}, expected one column of values")
    v = {f: a.reshape(-1) for f, a in v.items()}
    n = len(v["ts"])
    if any(len(a) != n for a in v.values()):
        sizes = ", ".join(f"{f} {len(a)}" for f, a in v.items())
        raise EventFormatError(path, 0, f"fields of unequal length ({sizes})")
    limit = np.iinfo(np.uint16).max
    x, y = _whole(path, "x", v["x"], 0, limit), _whole(path, "y", v["y"], 0, limit)
    p = _whole(path, "pol", v["pol"], 0, 1)
    t = _whole(path, "ts", v["ts"], -(2**62), 2**62)
    return make_events(t, x, y, p)
