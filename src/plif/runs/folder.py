"""The run folder's format, owned in one place: file names, the lock, config.json, metrics, summary.

Layout::

    <run>/.lock              held (plif.filelock) by the one process training in the folder; holds its pid
    <run>/config.json        the resolved config (everything needed to rebuild the network; read back
                             by plif.runs.config alone)
    <run>/metrics.jsonl      one JSON line per finished epoch
    <run>/summary.json       accuracy A and B, with their epochs and checkpoints (strict JSON: no NaN)
    <run>/checkpoints/       last.pt (resume), best_test.pt (A), best_val.pt (B)
    <run>/tensorboard/       event files when the run logs to TensorBoard (metrics.jsonl stays the truth)

Every writer goes through :mod:`plif.atomic`, whose temporary files are ``.<name>.*.tmp`` beside
the target; the owner of the lock removes those left by a killed process.

Nothing a finished epoch left is deleted without an explicit ``--restart``: a folder holding any
checkpoint, a ``summary.json`` or recorded metrics is resumed from ``last.pt`` or refused with a
message naming what is missing (:meth:`RunFolder.epoch_records`).  The folder's own entries must
be plain files and folders: the lock is opened with ``O_NOFOLLOW`` and a symbolic link among them
is refused (:meth:`RunFolder.refuse_links`), so nothing is written through a planted link.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

from ..atomic import atomic_write_bytes, atomic_write_json as write_json, new_folders, strict_json
from ..filelock import FileLock

__all__ = ["RunFolder", "RunFolderBusy", "CHECKPOINTS", "CONFIG", "METRICS", "SUMMARY", "read_metrics",
           "read_json_file", "prepare_out"]

CONFIG, METRICS, SUMMARY, LOCK, CHECKPOINT_DIR, TENSORBOARD = (
    "config.json", "metrics.jsonl", "summary.json", ".lock", "checkpoints", "tensorboard")
# which -> file name under <run>/checkpoints
CHECKPOINTS = {"last": "last.pt", "best_test": "best_test.pt", "best_val": "best_val.pt"}
"""The checkpoint files of a run (under ``checkpoints/``) by name: ``last`` every epoch, ``best_test``
(protocol A) and ``best_val`` (protocol B)."""


class RunFolderBusy(RuntimeError):
    """Another process holds the run folder's lock."""


def read_json_file(path: Path, what: str = "file"):
    """Parse a JSON file; a missing or malformed one raises an error naming it (line, column, byte)."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such {what}") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not a text file (byte {e.start} is not UTF-8)") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: invalid JSON at line {e.lineno} column {e.colno} (byte {e.pos}): {e.msg}") from None


def read_metrics(run_dir, notes: list[str] | None = None) -> list[dict]:
    """The rows of ``metrics.jsonl`` up to the first unreadable one (a torn last line after a crash).

    Problems are appended to ``notes`` when given; the rows before them are returned either way.
    """
    path = Path(run_dir) / METRICS
    if not path.is_file():
        if notes is not None:
            notes.append(f"no {METRICS} (no epoch recorded)")
        return []
    rows, offset = [], 0
    for lineno, line in enumerate(path.read_bytes().split(b"\n"), 1):
        if line.strip():
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                if notes is not None:
                    notes.append(f"{METRICS} line {lineno} (byte {offset + getattr(e, 'pos', 0)}) is not valid JSON; "
                                 "the rows before it are used")
                break
            if not isinstance(row, dict) or "epoch" not in row:
                if notes is not None:
                    notes.append(f"{METRICS} line {lineno} (byte {offset}) has no 'epoch'; the rows before it are used")
                break
            rows.append(row)
        offset += len(line) + 1
    return rows


def _os_error(path: Path, e: OSError, doing: str) -> ValueError:
    reason = e.strerror or str(e)
    if e.errno in (errno.ENOTDIR, errno.EEXIST):
        reason = "a part of the path is a file, not a folder"
    return ValueError(f"--out {path}: cannot {doing} ({reason})")


def prepare_out(path) -> list[Path]:
    """Create the run folder (and parents) or report, as one line naming it, why it cannot be.

    Returns the folders it created, outermost first (empty when the folder already existed)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"--out {path}: exists and is not a folder")
    created = new_folders(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _os_error(path, e, "create the run folder") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"--out {path}: the folder is not writable")
    return created


class RunFolder:
    """Paths and state of one run folder; :meth:`lock` makes this process its only writer."""

    def __init__(self, path):
        self.path = Path(path)
        self._lock: FileLock | None = None

    # --- paths -------------------------------------------------------------------------------
    @property
    def config(self) -> Path:
        return self.path / CONFIG

    @property
    def metrics(self) -> Path:
        return self.path / METRICS

    @property
    def summary(self) -> Path:
        return self.path / SUMMARY

    @property
    def tensorboard(self) -> Path:
        return self.path / TENSORBOARD

    def checkpoint(self, which: str) -> Path:
        """The path of checkpoint ``which`` (a key of :data:`CHECKPOINTS`), whether or not it exists."""
        if which not in CHECKPOINTS:
            raise ValueError(f"unknown checkpoint {which!r}; valid: {', '.join(CHECKPOINTS)}")
        return self.path / CHECKPOINT_DIR / CHECKPOINTS[which]

    # --- state -------------------------------------------------------------------------------
    def has_config(self) -> bool:
        """Whether ``config.json`` exists."""
        return self.config.is_file()

    def has_finished_epoch(self) -> bool:
        """A run can be continued: ``last.pt`` exists (written at the end of every epoch, and every
        ``--checkpoint-every`` steps, so also in the middle of the first epoch).

        Whether it loads, and whether ``metrics.jsonl`` agrees with it, the resume checks."""
        return self.checkpoint("last").is_file()

    def epoch_records(self) -> list[str]:
        """The entries that say an epoch finished here: any checkpoint, ``summary.json``, and a
        ``metrics.jsonl`` holding anything (readable or not).  A folder with none of them holds no
        work worth keeping; one with any is never cleared without ``--restart``."""
        found = [f"{CHECKPOINT_DIR}/{CHECKPOINTS[w]}" for w in CHECKPOINTS if self.checkpoint(w).is_file()]
        if self.summary.is_file():
            found.append(SUMMARY)
        if self.metrics.is_file() and self.metrics.read_bytes().strip():
            found.append(METRICS)
        return found

    def entries(self) -> list[Path]:
        """Every path of the run-folder format (files and the two sub-folders)."""
        return [self.path / LOCK, self.config, self.metrics, self.summary, self.tensorboard,
                self.path / CHECKPOINT_DIR, *(self.checkpoint(w) for w in CHECKPOINTS)]

    def refuse_links(self) -> None:
        """Raise ``ValueError`` naming the first entry of the format that is a symbolic link."""
        for p in self.entries():
            if p.is_symlink():
                raise ValueError(f"{p}: is a symbolic link (to {os.readlink(p)}); a run folder's own files must "
                                 "be plain files, plif does not write through links; remove the link")

    def require_run(self) -> None:
        """Raise ``FileNotFoundError`` saying "not a run folder" unless this is one."""
        if not self.path.is_dir():
            raise FileNotFoundError(f"{self.path}: not a run folder (no such folder)")
        if not self.has_config():
            raise FileNotFoundError(f"{self.path}: not a run folder (no {CONFIG})")

    def write_config(self, cfg_dict: dict) -> None:
        """Write ``config.json`` (the resolved config) atomically."""
        write_json(self.config, cfg_dict)

    def write_metrics(self, rows: list[dict]) -> None:
        """Write ``metrics.jsonl`` (one strict-JSON line per epoch) atomically."""
        atomic_write_bytes(self.metrics, "".join(json.dumps(strict_json(r), allow_nan=False) + "\n"
                                                 for r in rows).encode())

    def write_summary(self, summary: dict) -> None:
        """Write ``summary.json`` (accuracies A and B) atomically."""
        write_json(self.summary, summary)

    def read_summary(self) -> dict:
        """``summary.json`` as a dict (``{}`` when absent); a damaged file raises an error naming it."""
        return read_json_file(self.summary, "run summary") if self.summary.is_file() else {}

    # --- ownership ---------------------------------------------------------------------------
    def lock(self) -> "RunFolder":
        """Take the folder's exclusive lock (non-blocking, :class:`plif.filelock.FileLock`) and
        write our pid into it.

        Raises :class:`RunFolderBusy` naming the holder's pid when another process has it.  The
        lock lives as long as the open file: it goes away with the process, even after kill -9.
        """
        lock = FileLock(self.path / LOCK)
        try:
            if not lock.try_acquire():
                raise RunFolderBusy(f"{self.path} is in use by another plif process (pid {lock.holder()}); "
                                    "wait for it to finish or choose another --out")
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise ValueError(f"{lock.path}: is a symbolic link; plif does not write its lock through a link; "
                                 "remove it") from None
            raise _os_error(self.path, e, "write in the run folder") from None
        self._lock = lock
        return self

    def unlock(self, remove: bool = False) -> None:
        """Release the lock; ``remove``: delete ``.lock`` too (a run that leaves nothing behind)."""
        if self._lock is not None:
            self._lock.release(remove)
            self._lock = None

    def unlock_as_found(self, created: list[Path]) -> None:
        """Release the lock after a refusal: ``.lock`` is removed when this process made it, and so
        are the folders it ``created`` (outermost first) where they hold nothing else."""
        self.unlock(remove=self._lock is not None and self._lock.created)
        remove_empty_folders(created)

    def __enter__(self):
        return self.lock() if self._lock is None else self

    def __exit__(self, *exc):
        self.unlock()

    def clean_stale_temporaries(self) -> list[Path]:
        """Remove ``.<name>.*.tmp`` files a killed writer left (only safe while holding the lock)."""
        if self._lock is None:
            raise RuntimeError("clean_stale_temporaries needs the run folder's lock")
        removed = []
        for folder in (self.path, self.path / CHECKPOINT_DIR):
            if folder.is_dir():
                for p in folder.glob(".*.tmp"):
                    p.unlink(missing_ok=True)
                    removed.append(p)
        return removed

    def clear_unfinished(self) -> None:
        """Forget a run that never finished an epoch, so it can start again (lock held)."""
        if self.epoch_records():
            raise RuntimeError(f"{self.path}: holds finished epochs ({', '.join(self.epoch_records())}); "
                               "not clearing it")
        for p in (self.config, self.metrics):
            p.unlink(missing_ok=True)

    def delete_run(self) -> list[str]:
        """``--restart``: delete the run's config, metrics, summary, checkpoints and TensorBoard
        logs (only the format's own entries; lock held).  Returns what was deleted."""
        if self._lock is None:
            raise RuntimeError("delete_run needs the run folder's lock")
        self.refuse_links()
        gone = [str(p.relative_to(self.path)) for p in (self.config, self.metrics, self.summary,
                                                         *(self.checkpoint(w) for w in CHECKPOINTS)) if p.is_file()]
        for p in (self.config, self.metrics, self.summary, *(self.checkpoint(w) for w in CHECKPOINTS)):
            p.unlink(missing_ok=True)
        if self.tensorboard.is_dir():
            shutil.rmtree(self.tensorboard)
            gone.append(TENSORBOARD)
        return gone

    def discard_new(self, created: list[Path], new_tensorboard: bool) -> None:
        """Undo a fresh run that failed before finishing its first epoch: remove what it wrote
        (config, metrics, summary, checkpoints of the unfinished epoch, the tensorboard/ it made)
        and the folders it created, so a refusal or a failed start leaves no stub behind.  Only
        for a fresh run: the folder recorded no epoch when it started (the set-up refuses one that
        does), so everything of the format in it is this process's.  Lock held; releases it."""
        for p in (self.config, self.metrics, self.summary, *(self.checkpoint(w) for w in CHECKPOINTS)):
            p.unlink(missing_ok=True)
        if new_tensorboard and self.tensorboard.is_dir() and not self.tensorboard.is_symlink():
            shutil.rmtree(self.tensorboard, ignore_errors=True)
        _rmdir_if_empty(self.path / CHECKPOINT_DIR)
        self.unlock(remove=True)  # the next run makes its own
        remove_empty_folders(created)


def remove_empty_folders(created: list[Path]) -> None:
    """Remove the folders of ``created`` (outermost first), innermost first, while they are empty."""
    for d in reversed(created):
        if not _rmdir_if_empty(d):
            break


def _rmdir_if_empty(d: Path) -> bool:
    try:
        d.rmdir()
        return True
    except OSError:
        return False
