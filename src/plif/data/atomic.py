"""Atomic file writes: a reader never sees a half-written file, an interrupted write leaves none."""
from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["atomic_write_bytes", "atomic_save_npy"]


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder, then ``os.replace``.

    The temporary file lives beside the target so the final rename never crosses file systems
    (where ``os.replace`` would stop being atomic).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def atomic_save_npy(path: str | Path, array: np.ndarray) -> Path:
    """``np.save`` made atomic; the file is a plain ``.npy`` readable by ``np.load``."""
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return atomic_write_bytes(path, buf.getvalue())
