"""What a file's content is, cheaply: ``stat`` (size, mtime_ns, inode), the hash of its edges (the
size, the first and the last 64 KiB: all of a file up to 128 KiB) and a BLAKE2 hash of the whole.

A load compares the stat and hashes the edges, so an edit that puts the old size, mtime and inode
back is still seen when it touches a file's first or last 64 KiB (anywhere in an N-MNIST
recording, the header and the end of a large one); the whole file is hashed whenever the stat
differs (a same-size edit changes the hash; a copy or ``touch`` with the same bytes is recognised as
unchanged), and always by ``plif data prepare`` and ``plif data verify``, which find an edit in the
middle of a large file too.  Also here: the byte-identical files of two lists (:func:`same_bytes`)."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["file_stat", "file_hash", "file_hashes", "edges_hash", "fingerprint", "same_content", "same_bytes"]

_BLOCK = 1 << 20
EDGE = 64 << 10  # bytes hashed at each end of a file on every load


def file_stat(path: str | Path) -> list[int]:
    st = os.stat(path)
    return [int(st.st_size), int(st.st_mtime_ns), int(st.st_ino)]


def _edges(size: int) -> list[tuple[int, int]]:
    """The byte ranges ``[a, b)`` the edges hash covers in a file of ``size`` bytes: the whole file
    when it holds at most two edges, else its first and last :data:`EDGE` bytes."""
    return [(0, size)] if size <= 2 * EDGE else [(0, EDGE), (size - EDGE, size)]


def _hashes(path: str | Path, edges: bool) -> tuple[str, str]:
    """BLAKE2b-128 of the whole file and (with ``edges``) of its size and :func:`_edges` bytes, hex,
    in one pass over the file."""
    whole, edge = hashlib.blake2b(digest_size=16), hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        edge.update(size.to_bytes(8, "little"))
        spans, pos = (_edges(size) if edges else []), 0
        while block := f.read(_BLOCK):
            whole.update(block)
            view = memoryview(block)
            for a, b in spans:
                if a < pos + len(block) and b > pos:
                    edge.update(view[max(a - pos, 0):b - pos])
            pos += len(block)
    return whole.hexdigest(), edge.hexdigest()


def file_hash(path: str | Path) -> str:
    """BLAKE2b-128 of the whole file, hex."""
    return _hashes(path, edges=False)[0]


def file_hashes(path: str | Path) -> tuple[str, str]:
    """``(file_hash(path), edges_hash(path))`` from one read of the file."""
    return _hashes(path, edges=True)


def edges_hash(path: str | Path) -> str:
    """BLAKE2b-128 of the size and the first and last :data:`EDGE` bytes (the whole file when it
    holds at most two edges), hex: at most 128 KiB read, whatever the file's size."""
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        h.update(size.to_bytes(8, "little"))
        for a, b in _edges(size):
            f.seek(a)
            h.update(f.read(b - a))
    return h.hexdigest()


def fingerprint(path: str | Path) -> dict:
    stat = file_stat(path)
    whole, edges = file_hashes(path)
    return {"stat": stat, "hash": whole, "edges": edges}


def same_content(path: str | Path, fp: dict, always_hash: bool = False) -> bool:
    """True when ``path`` still holds what ``fp`` recorded.  An equal stat and equal edges decide
    (blind only to an edit past the edges of a file larger than 128 KiB that restores size, mtime
    and inode); otherwise, with ``always_hash``, or when ``fp`` has no edges yet (an older cache),
    the whole file's hash does, and ``fp``'s stat and edges are updated in place when the bytes are
    the same."""
    try:
        stat = file_stat(path)
        if stat[0] != fp["stat"][0]:
            return False
        if stat == fp["stat"] and not always_hash and "edges" in fp:
            return edges_hash(path) == fp["edges"]
        whole, edges = file_hashes(path)
        if whole != fp["hash"]:
            return False
        fp["stat"], fp["edges"] = stat, edges
    except OSError:
        return False
    return True


def _head_hash(path: str | Path) -> str:
    with open(path, "rb") as f:
        return hashlib.blake2b(f.read(4096), digest_size=16).hexdigest()


def same_bytes(ours, theirs, sizes: dict[str, int] | None = None) -> list[tuple[str, str]]:
    """``(a, b)`` for each file ``a`` of ``ours`` whose bytes are those of a file ``b`` of ``theirs``
    (the first such by name), sorted.  Files are compared by size (one ``stat`` each, none where
    ``sizes`` maps the path to its size already), then by their first 4 KiB, then by the whole hash,
    each step only among the files still alike on both sides: a file whose size no file of the other
    side has costs one stat; empty files (all alike) are left out."""
    keys = [{p: () for p in sorted(set(map(str, side)))} for side in (ours, theirs)]
    size = sizes.__getitem__ if sizes is not None else (lambda p: os.stat(p).st_size)
    for key in (size, _head_hash, file_hash):
        keys = [{p: k + (key(p),) for p, k in side.items()} for side in keys]
        shared = set(keys[0].values()) & set(keys[1].values())
        keys = [{p: k for p, k in side.items() if k in shared and k[0] > 0} for side in keys]
    twin: dict = {}
    for p, k in keys[1].items():
        twin.setdefault(k, p)
    return sorted((p, twin[k]) for p, k in keys[0].items())
