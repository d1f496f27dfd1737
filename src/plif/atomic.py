"""Atomic file writes: a reader never sees a half-written file, an interrupted write leaves none.

Every writer in the project goes through :func:`atomic_path`: the data is written to a temporary
file beside the target (so the final ``os.replace`` never crosses file systems, where it would
stop being atomic), given a normal file's permissions, then renamed over the target.

The temporary file is created with ``O_EXCL`` (never through an existing name or symbolic link)
and :func:`atomic_write_bytes` writes through that same descriptor, so a link planted beside the
target cannot redirect the data.  An OS error (a full disk, a read-only folder) names the target:
``No space left on device`` alone would not say which of a run's files failed.

A command that writes several files into one folder runs them inside :func:`new_files_undone`:
if it fails half-way, the files it added and the folders it made are removed again.
"""
from __future__ import annotations

import io
import json
import math
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

__all__ = ["atomic_path", "atomic_write_bytes", "atomic_write_text", "atomic_write_json", "atomic_save_npy",
           "strict_json", "named_os_error", "new_folders", "new_files_undone"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def named_os_error(e: OSError, path) -> OSError:
    """``e`` with ``path`` as its file name when it has none (``os.write`` errors carry no path)."""
    if e.filename is None and e.errno is not None:
        return type(e)(e.errno, e.strerror or os.strerror(e.errno), str(path))
    return e


@contextmanager
def _temporary(path: Path):
    """``(fd, tmp)`` of a new temporary file beside ``path``; renamed over it on success, removed on error."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise named_os_error(e, path) from None
    try:
        yield fd, tmp
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file a normal file's mode
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and e.filename in (None, tmp) and e.errno is not None:
            raise type(e)(e.errno, e.strerror or os.strerror(e.errno), str(path)) from None  # not the temp name
        raise
    finally:
        try:
            os.close(fd)
        except OSError:
            pass


@contextmanager
def atomic_path(path: str | Path):
    """Yield a temporary path beside ``path`` for a writer that opens files by name (h5py, a
    compiler); on normal exit it replaces ``path``, on error it is removed."""
    with _temporary(Path(path)) as (_, tmp):
        yield Path(tmp)


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (flushed to disk before the rename)."""
    with _temporary(Path(path)) as (fd, _):
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    return Path(path)


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode())


def strict_json(obj):
    """``obj`` with every non-finite float replaced by ``None`` (JSON has no NaN or infinity; null
    says "no value" unambiguously), so ``json.dumps(allow_nan=False)`` works."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: strict_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict_json(v) for v in obj]
    return obj


def atomic_write_json(path: str | Path, obj, indent: int | None = 2) -> Path:
    """Valid JSON (RFC 8259: no NaN/Infinity, see :func:`strict_json`), written atomically."""
    return atomic_write_bytes(path, (json.dumps(strict_json(obj), indent=indent, allow_nan=False) + "\n").encode())


def atomic_save_npy(path: str | Path, array: np.ndarray) -> Path:
    """``np.save`` made atomic; the file is a plain ``.npy`` readable by ``np.load``."""
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return atomic_write_bytes(path, buf.getvalue())


def new_folders(path: str | Path) -> list[Path]:
    """The folders that making ``path`` (with its parents) would create, outermost first."""
    path = Path(path)
    return [p for p in (*reversed(path.parents), path) if not os.path.lexists(p)]


@contextmanager
def new_files_undone(folder: str | Path):
    """Run a block that writes files into ``folder``; if it raises, the files it added there and the
    folders it made (``folder`` and its parents) are removed again, so a failed command leaves no
    empty or partial folder behind.  Files it replaced stay replaced (each write was atomic)."""
    folder = Path(folder)
    made = new_folders(folder)
    before = set(folder.iterdir()) if not made and folder.is_dir() else set()
    try:
        yield folder
    except BaseException:
        if made:
            shutil.rmtree(made[0], ignore_errors=True)  # nothing in it was there before
        elif folder.is_dir():
            for p in set(folder.iterdir()) - before:
                if p.is_file() or p.is_symlink():
                    p.unlink(missing_ok=True)
        raise
