"""One exclusive lock on a file per process (``fcntl.flock``), holding its holder's pid: run folders and frame caches.

The lock lives as long as the open file, so it goes away with its process, even after ``kill -9``,
and never needs cleaning.  It is advisory and local (a second machine on a network file system
does not see it).  The file is opened with ``O_NOFOLLOW``: a symbolic link planted in its place is
refused (``OSError`` with ``errno.ELOOP``), never written through.

A holder may delete the file (:meth:`FileLock.release` with ``remove=True``) to leave nothing
behind.  A process that opened the old file just before that would then lock a file no longer in
the folder while a third locks a new one; :meth:`FileLock.try_acquire` therefore checks, once it
holds the lock, that its file is still the one at the path, and tries again on the new one if not.
"""
from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

__all__ = ["FileLock"]


class FileLock:
    """``path`` locked exclusively by this object (not only this process: two objects on one path
    exclude each other, as two processes do).  ``created`` says whether the file was made here."""

    def __init__(self, path):
        self.path = Path(path)
        self.created = False
        self._fd: int | None = None
        self._seen = ""  # the pid read from the file when another holder had it

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it and write this process's pid into the file (True); False
        when another holder has it.  OS errors (a link in its place, a read-only folder) propagate."""
        if self._fd is not None:
            return True
        while True:
            fd, created = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._seen = _read_pid(fd)
                os.close(fd)
                return False
            except BaseException:
                os.close(fd)
                raise
            if self._same_file(fd):
                break
            os.close(fd)  # its holder removed it meanwhile: lock the file that is there now
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            if created:
                self.path.unlink(missing_ok=True)
            os.close(fd)
            raise
        self._fd, self.created = fd, created
        return True

    def acquire(self, poll: float = 0.2) -> None:
        """Take the lock, waiting as long as another holder has it (checked every ``poll`` seconds)."""
        while not self.try_acquire():
            time.sleep(poll)

    def holder(self) -> str:
        """The pid of the holder that made :meth:`try_acquire` fail last (``"unknown"`` if its file said none)."""
        return self._seen or "unknown"

    def release(self, remove: bool = False) -> None:
        """Let the lock go; ``remove``: delete the file first, while still holding it."""
        if self._fd is None:
            return
        if remove:
            self.path.unlink(missing_ok=True)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def _open(self) -> tuple[int, bool]:
        flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC
        while True:
            try:
                return os.open(self.path, flags | os.O_CREAT | os.O_EXCL, 0o644), True
            except FileExistsError:
                pass
            try:
                return os.open(self.path, flags), False
            except FileNotFoundError:
                continue  # removed between the two calls

    def _same_file(self, fd: int) -> bool:
        try:
            now = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        return (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)


def _read_pid(fd: int) -> str:
    try:
        return os.pread(fd, 32, 0).decode(errors="replace").strip()
    except OSError:
        return ""
