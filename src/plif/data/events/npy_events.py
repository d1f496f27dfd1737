"""DVS-Lip's recordings (Tan et al. 2022): one ``.npy`` file per sample holding a structured array with
fields ``t`` (microseconds), ``x``, ``y`` and ``p`` (1 = ON, 0 = OFF) on a 128 x 128 DVS, read with
``np.load`` without pickles.

A file that is not an ``.npy`` array, an array that is not 1-d and structured, a missing field, a field
that does not hold integers (or booleans for ``p``), a negative coordinate or a polarity other than
0 / 1 is an :class:`.types.EventFormatError` naming the file and the field.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .types import EventFormatError, make_events

__all__ = ["MAGIC", "FIELDS", "read_npy_events"]

MAGIC = b"\x93NUMPY"
FIELDS = ("t", "x", "y", "p")


def read_npy_events(path: str | Path) -> np.ndarray:
    """One DVS-Lip recording -> structured events ``[N]`` (fields t, x, y, p; see the module)."""
    try:
        a = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise EventFormatError(path, 0, f"not a readable .npy array ({' '.join(str(e).split())})") from None
    if not isinstance(a, np.ndarray) or a.dtype.names is None or a.ndim != 1:
        what = getattr(a, "dtype", type(a).__name__)
        raise EventFormatError(path, 0, f"holds {what} {getattr(a, 'shape', '')}, expected a 1-d structured array "
                                        f"with fields {', '.join(FIELDS)}")
    missing = [f for f in FIELDS if f not in a.dtype.names]
    if missing:
        raise EventFormatError(path, 0, f"field {missing[0]!r} missing (has {', '.join(a.dtype.names)})")
    for f in FIELDS:
        kinds = "iub" if f == "p" else "iu"
        if a.dtype[f].kind not in kinds:
            raise EventFormatError(path, 0, f"field {f!r} holds {a.dtype[f]}, expected integers")
    t, x, y, p = (a[f].astype(np.int64) for f in FIELDS)
    for f, v in (("x", x), ("y", y)):
        if v.size and (v.min() < 0 or v.max() > np.iinfo(np.uint16).max):
            raise EventFormatError(path, 0, f"field {f!r} holds {int(v.min()) if v.min() < 0 else int(v.max())}, "
                                            "not a pixel coordinate")
    if p.size and (p.min() < 0 or p.max() > 1):
        raise EventFormatError(path, 0, f"field 'p' holds values in [{int(p.min())}, {int(p.max())}], expected 0 or 1")
    return make_events(t, x, y, p)
