"""What a file's content is, cheaply: ``stat`` (size, mtime_ns, inode) with a BLAKE2 hash that
decides whenever the stat differs (a same-size edit changes the hash; a copy or ``touch`` with the
same bytes is recognised as unchanged).  An edit that restores size, mtime and inode passes the
stat check: only the hash (``plif data verify``) finds it."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["file_stat", "file_hash", "fingerprint", "same_content"]

_BLOCK = 1 << 20


def file_stat(path: str | Path) -> list[int]:
    st = os.stat(path)
    return [int(st.st_size), int(st.st_mtime_ns), int(st.st_ino)]


def file_hash(path: str | Path) -> str:
    """BLAKE2b-128 of the whole file, hex."""
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            h.update(block)
    return h.hexdigest()


def fingerprint(path: str | Path) -> dict:
    return {"stat": file_stat(path), "hash": file_hash(path)}


def same_content(path: str | Path, fp: dict, always_hash: bool = False) -> bool:
    """True when ``path`` still holds what ``fp`` recorded.  The stat decides when it is equal
    (cheap, but blind to an edit that restores size, mtime and inode, e.g. ``cp -p`` onto the file
    or a reset mtime); otherwise, or with ``always_hash``, the hash does (and ``fp["stat"]`` is
    updated in place when the bytes are the same)."""
    try:
        stat = file_stat(path)
    except OSError:
        return False
    if stat == fp.get("stat") and not always_hash:
        return True
    if stat[0] != fp["stat"][0] or file_hash(path) != fp["hash"]:
        return False
    fp["stat"] = stat
    return True
