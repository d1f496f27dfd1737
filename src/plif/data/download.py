"""Fetch a file over HTTP(S) with a checksum, or fail saying exactly what to put where."""
from __future__ import annotations

import hashlib
import urllib.error
import urllib.request
from pathlib import Path

from ..atomic import atomic_write_bytes

__all__ = ["file_md5", "download_file"]


def file_md5(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def download_file(urls: list[str], dest: Path, md5: str | None, timeout: float = 30.0) -> Path:
    """Try each mirror in turn; write ``dest`` atomically once a download matches ``md5``.

    Raises ``OSError`` listing every mirror's failure when none worked (no network, checksum
    mismatch, HTTP error); the caller turns that into a message telling the user what to do.
    """
    failures = []
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as r:
                data = r.read()
        except (urllib.error.URLError, OSError, ValueError) as e:
            failures.append(f"{url}: {e}")
            continue
        got = hashlib.md5(data).hexdigest()
        if md5 is not None and got != md5:
            failures.append(f"{url}: md5 {got} != expected {md5}")
            continue
        return atomic_write_bytes(dest, data)
    raise OSError("; ".join(failures) or "no URL given")
