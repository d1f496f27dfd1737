"""DVS128 Gesture (Amir et al. 2017) bookkeeping: label files, trial lists, cutting recordings.

Each recording ``userXX_<lighting>.aedat`` (AEDAT 3.1) has a ``userXX_<lighting>_labels.csv``
with the header ``class,startTime_usec,endTime_usec`` and one row per gesture (class 1..11);
``trials_to_train.txt`` / ``trials_to_test.txt`` list the recordings of each split (1176 / 288
gestures).  A sample is the events of one row with ``start <= t < end``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...catalog import GESTURE_CLASS_NAMES

__all__ = ["GESTURE_CLASSES", "LABEL_HEADER", "read_gesture_labels", "read_trials", "cut_events"]

GESTURE_CLASSES = len(GESTURE_CLASS_NAMES)  # 11
LABEL_HEADER = ("class", "startTime_usec", "endTime_usec")
LABEL_DTYPE = np.dtype([("cls", "<i8"), ("start", "<i8"), ("end", "<i8")])


def read_gesture_labels(path: str | Path) -> np.ndarray:
    """Parse one ``*_labels.csv`` -> structured ``[K]`` with fields cls (1..11), start, end (µs).

    Blank lines are ignored; anything else malformed is a ``ValueError`` naming file and line.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8-sig")  # a BOM would otherwise spoil the header check
    rows = []
    header_seen = False
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        fields = [f.strip() for f in line.split(",")]
        if not header_seen:
            if tuple(fields) != LABEL_HEADER:
                raise ValueError(f"{path}:{lineno}: expected header {','.join(LABEL_HEADER)!r}, got {line!r}")
            header_seen = True
            continue
        if len(fields) != 3:
            raise ValueError(f"{path}:{lineno}: expected 3 comma-separated fields, got {len(fields)} in {line!r}")
        try:
            cls, start, end = (int(f) for f in fields)
        except ValueError:
            raise ValueError(f"{path}:{lineno}: non-integer field in {line!r}") from None
        if not 1 <= cls <= GESTURE_CLASSES:
            raise ValueError(f"{path}:{lineno}: class {cls} outside 1..{GESTURE_CLASSES}")
        if not 0 <= start < end:
            raise ValueError(f"{path}:{lineno}: need 0 <= startTime < endTime, got {start}, {end}")
        rows.append((cls, start, end))
    if not header_seen:
        raise ValueError(f"{path}: empty label file (no {','.join(LABEL_HEADER)} header)")
    return np.array(rows, dtype=LABEL_DTYPE)


def read_trials(path: str | Path) -> list[str]:
    """Recording file names listed in ``trials_to_train.txt`` / ``trials_to_test.txt``, in order."""
    path = Path(path)
    names = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    for i, n in enumerate(names, start=1):
        if "/" in n or "\\" in n or not n.endswith(".aedat"):
            raise ValueError(f"{path}: entry {i} {n!r} is not a bare '*.aedat' file name")
    return names


def cut_events(events: np.ndarray, start: int, end: int) -> np.ndarray:
    """The events of ``[N]`` with ``start <= t < end`` (file order kept)."""
    t = events["t"]
    if len(t) > 1 and np.all(t[1:] >= t[:-1]):  # the usual case: a binary search, no full mask
        lo, hi = np.searchsorted(t, [start, end], side="left")
        return events[lo:hi]
    return events[(t >= start) & (t < end)]
