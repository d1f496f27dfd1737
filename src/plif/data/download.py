"""Fetch a dataset file over HTTP(S) with pooch: checksum, progress, resume, mirrors.

``download_file(urls, dest, md5)`` hands each mirror to ``pooch.retrieve`` with a downloader that
streams into ``<dest>.part`` beside the destination.  An interrupted transfer leaves that file;
the next attempt (in the same call, or a later run) asks the server for the rest with an HTTP
``Range`` request and appends, or starts over when the server answers with the whole file.  pooch
checks the md5 and moves the file into place only when it matches: a mismatching download leaves
neither ``dest`` nor a ``.part`` behind; one cut off by the network keeps its non-empty ``.part``
for the next try.  Progress goes to stderr (a bar on a terminal, pooch's one-line messages
otherwise).
"""
from __future__ import annotations

import hashlib
import os
import re
import sys
from pathlib import Path

__all__ = ["file_md5", "download_file", "ResumableHTTPDownloader"]

CHUNK = 1 << 16


def file_md5(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


class ResumableHTTPDownloader:
    """A pooch downloader (``downloader(url, output_file, pooch)``) that resumes from ``part``.

    ``attempts`` connections are tried per call; each one continues from the bytes already in
    ``part``.  ``progress``: ``None`` shows a bar only when stderr is a terminal.
    """

    def __init__(self, part: Path, timeout: float = 30.0, attempts: int = 3, progress: bool | None = None):
        self.part, self.timeout, self.attempts, self.progress = Path(part), timeout, attempts, progress

    def __call__(self, url: str, output_file, pooch=None, check_only: bool = False):
        import requests

        if check_only:
            with requests.head(url, timeout=self.timeout, allow_redirects=True) as r:
                return r.status_code == 200
        errors = []
        for _ in range(self.attempts):
            try:
                self._fetch(url, requests)
                break
            except (requests.exceptions.RequestException, OSError) as e:
                errors.append(f"{type(e).__name__}: {e}")
        else:
            have = self._have()
            kept = f"{have} bytes kept in {self.part} for the next try" if have else "nothing received"
            # no URL here: download_file names the URL in front of every failure
            raise requests.exceptions.ConnectionError(f"{len(errors)} attempts failed ({errors[-1]}); {kept}")
        # pooch hashes output_file, then moves it into place (or deletes it on a mismatch)
        os.replace(self.part, output_file if isinstance(output_file, (str, os.PathLike)) else output_file.name)

    def _have(self) -> int:
        return self.part.stat().st_size if self.part.is_file() else 0

    def _fetch(self, url: str, requests) -> None:
        have = self._have()
        headers = {"Range": f"bytes={have}-"} if have else {}
        with requests.get(url, headers=headers, stream=True, timeout=self.timeout) as r:
            if r.status_code == 416 and have:  # nothing left to send: the part is complete
                return
            r.raise_for_status()
            resumed = r.status_code == 206
            if resumed and not r.headers.get("Content-Range", "").startswith(f"bytes {have}-"):
                self.part.unlink()  # a range we did not ask for: appending would corrupt the file
                raise OSError(f"asked for bytes {have}- but got Content-Range "
                              f"{r.headers.get('Content-Range')!r}; starting over")
            if not resumed:
                have = 0  # the server sent the whole file: start over
            length = r.headers.get("Content-Length")
            total = have + int(length) if length is not None else None
            with open(self.part, "ab" if resumed else "wb") as f, _bar(total, have, url, self.progress) as bar:
                for block in r.iter_content(CHUNK):
                    f.write(block)
                    bar.update(len(block))
        if total is not None and self._have() != total:
            raise OSError(f"transfer ended at byte {self._have()} of {total}")


def _bar(total, initial, url, progress):
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr,
                desc=url.rsplit("/", 1)[-1], disable=(None if progress is None else not progress), leave=False)


def download_file(urls: list[str], dest: Path, md5: str | None, timeout: float = 30.0,
                  progress: bool | None = None) -> Path:
    """Try each mirror in turn; ``dest`` appears (atomically) only once a download matches ``md5``.

    Raises ``OSError`` listing every mirror's failure when none worked (no network, checksum
    mismatch, HTTP error); the caller turns that into a message telling the user what to do.
    """
    import pooch
    import requests

    dest = Path(dest)
    part = dest.with_name(dest.name + ".part")
    known = f"md5:{md5}" if md5 else None
    failures = []
    for url in urls:
        downloader = ResumableHTTPDownloader(part, timeout=timeout, progress=progress)
        try:
            pooch.retrieve(url, known_hash=known, fname=dest.name, path=dest.parent, downloader=downloader)
            return dest
        except ValueError as e:  # pooch: a hash mismatch (the file is already deleted), or a bad URL
            got = re.search(r"does not match the known hash: expected \S+ but got (\w+)", str(e))
            if got is None:
                failures.append(f"{url}: {e}")
                continue
            part.unlink(missing_ok=True)
            failures.append(f"{url}: md5 {got.group(1)} != expected {md5}")
        except (requests.exceptions.RequestException, OSError) as e:
            failures.append(f"{url}: {e}")
    if not part.is_file() or part.stat().st_size == 0:
        part.unlink(missing_ok=True)
    raise OSError("; ".join(failures) or "no URL given")
