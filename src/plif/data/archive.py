"""Unpack a downloaded zip or tar archive safely and atomically.

Every member is checked before a byte is written: its name must stay inside the destination
(no absolute path, no ``..``, no drive letter or backslash), it must be a plain file or folder
(no links, devices or fifos), no two members may have one name (which one landed on disk would
depend on the unpacker), the files the caller requires (glob patterns, e.g. the layout a dataset's
loaders read) must be there, and the archive as a whole must stay under ``max_bytes``
unpacked, ``max_members`` entries and, for each member above 1 MiB, ``max_ratio`` times its
compressed size (a zip bomb expands thousands of times).  The free disk space must hold the
unpacked size.  While unpacking, the bytes actually written are counted against the size the
member declared, so a header that lies stops the extraction too.

Everything is unpacked into a temporary folder beside the destination and moved into place,
one top-level entry at a time (``os.replace``, same file system), only once the whole archive
unpacked cleanly; on any error the temporary folder is removed and nothing is left half-written.
A top-level entry that already exists is never overwritten.
"""
from __future__ import annotations

import fnmatch
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

__all__ = ["ArchiveError", "Limits", "extract_archive"]

_MIB = 1 << 20
_CHUNK = 1 << 20


class ArchiveError(ValueError):
    """An archive that is unsafe, corrupt or does not fit (the message names the archive and member)."""


@dataclass(frozen=True)
class Limits:
    max_bytes: int = 64 << 30  # unpacked total
    max_members: int = 500_000
    max_ratio: float = 200.0  # unpacked / compressed, for members above 1 MiB


@dataclass(frozen=True)
class _Member:
    name: str  # as stored
    parts: tuple[str, ...]  # checked, relative
    is_dir: bool
    size: int  # declared unpacked size
    packed: int | None  # compressed size (zip), None when the format does not say per member


def _safe_parts(archive: Path, name: str) -> tuple[str, ...]:
    if "\\" in name or "\x00" in name:
        raise ArchiveError(f"{archive}: member {name!r}: backslash or NUL in the name; refused")
    p = PurePosixPath(name)
    if p.is_absolute() or (p.parts and p.parts[0].endswith(":")):
        raise ArchiveError(f"{archive}: member {name!r} has an absolute path; refused")
    parts = tuple(x for x in p.parts if x not in ("", "."))
    if ".." in parts:
        raise ArchiveError(f"{archive}: member {name!r} points outside the destination ('..'); refused")
    if not parts:
        raise ArchiveError(f"{archive}: member {name!r} has an empty name; refused")
    return parts


def _zip_members(archive: Path, zf: zipfile.ZipFile) -> list[_Member]:
    out = []
    for info in zf.infolist():
        kind = stat.S_IFMT(info.external_attr >> 16)  # 0: no Unix type recorded (a plain member)
        if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise ArchiveError(f"{archive}: member {info.filename!r} is a link or special file; refused")
        out.append(_Member(info.filename, _safe_parts(archive, info.filename), info.is_dir(), info.file_size,
                           info.compress_size))
    return out


def _tar_members(archive: Path, tf: tarfile.TarFile) -> list[_Member]:
    out = []
    for info in tf.getmembers():
        if not (info.isfile() or info.isdir()):
            raise ArchiveError(f"{archive}: member {info.name!r} is a link or special file; refused")
        out.append(_Member(info.name, _safe_parts(archive, info.name), info.isdir(), info.size, None))
    return out


def _refuse_duplicates(archive: Path, members: list[_Member]) -> None:
    """Two members with one name, or a file that another member treats as a folder, are refused
    (folders listed twice are harmless)."""
    is_dir: dict[tuple[str, ...], bool] = {}
    for m in members:
        seen = is_dir.get(m.parts)
        if seen is not None and not (seen and m.is_dir):
            raise ArchiveError(f"{archive}: two members named {'/'.join(m.parts)!r}: which one is meant? refused")
        is_dir[m.parts] = m.is_dir
    for m in members:
        for i in range(1, len(m.parts)):
            if is_dir.get(m.parts[:i]) is False:
                raise ArchiveError(f"{archive}: {'/'.join(m.parts[:i])!r} is a file, and member {m.name!r} is "
                                   "inside it as if it were a folder; refused")


def _missing(members: list[_Member], require: tuple[str, ...]) -> list[str]:
    """The patterns of ``require`` (``/``-separated globs, one per path part) that match no file member."""
    by_folder: dict[tuple[str, ...], list[str]] = {}
    for m in members:
        if not m.is_dir:
            by_folder.setdefault(m.parts[:-1], []).append(m.parts[-1])

    def found(pattern: str) -> bool:
        *folder, name = pattern.split("/")
        if any(c in part for part in folder for c in "*?["):  # a wildcard folder: look at every folder
            candidates = [names for f, names in by_folder.items() if len(f) == len(folder)
                          and all(fnmatch.fnmatchcase(a, p) for a, p in zip(f, folder))]
        else:
            candidates = [by_folder.get(tuple(folder), [])]
        return any(fnmatch.fnmatchcase(n, name) for names in candidates for n in names)

    return [p for p in require if not found(p)]


def _check_limits(archive: Path, members: list[_Member], dest: Path, limits: Limits) -> int:
    if len(members) > limits.max_members:
        raise ArchiveError(f"{archive}: {len(members)} members, more than the limit of {limits.max_members}; refused")
    total = sum(m.size for m in members)
    if total > limits.max_bytes:
        raise ArchiveError(f"{archive}: unpacks to {total:,} bytes, more than the limit of {limits.max_bytes:,}; refused")
    for m in members:
        if m.packed is not None and m.size > _MIB and m.size > limits.max_ratio * max(m.packed, 1):
            raise ArchiveError(f"{archive}: member {m.name!r} expands {m.size / max(m.packed, 1):,.0f} times "
                               f"({m.packed:,} -> {m.size:,} bytes), more than {limits.max_ratio:g}; refused")
    free = shutil.disk_usage(dest).free
    if total > free:
        raise ArchiveError(f"{archive}: unpacks to {total:,} bytes but {dest} has {free:,} bytes free")
    return total


class _open:
    """``with _open(path) as (members, read)``: ``read(member)`` gives a binary file object."""

    def __init__(self, archive: Path):
        self.archive = archive

    def __enter__(self):
        a = self.archive
        try:
            if zipfile.is_zipfile(a):
                self._f = zipfile.ZipFile(a)
                return _zip_members(a, self._f), lambda m: self._f.open(m.name)
            if tarfile.is_tarfile(a):
                self._f = tarfile.open(a)
                return _tar_members(a, self._f), lambda m: self._f.extractfile(m.name)
        except (zipfile.BadZipFile, tarfile.TarError, EOFError) as e:
            raise ArchiveError(f"{a}: corrupt archive ({e})") from None
        raise ArchiveError(f"{a}: neither a zip nor a tar archive")

    def __exit__(self, *exc):
        self._f.close()


def _copy(archive: Path, m: _Member, src, target: Path) -> None:
    written = 0
    with open(target, "wb") as out:
        while block := src.read(_CHUNK):
            written += len(block)
            if written > m.size:
                raise ArchiveError(f"{archive}: member {m.name!r} unpacks to more than the {m.size:,} bytes it declares")
            out.write(block)
    if written != m.size:
        raise ArchiveError(f"{archive}: member {m.name!r} unpacked to {written:,} bytes, not the {m.size:,} it declares")


def extract_archive(archive: str | Path, dest: str | Path, limits: Limits = Limits(),
                    require: tuple[str, ...] = ()) -> list[Path]:
    """Unpack ``archive`` (zip or tar, detected by content) into ``dest``; returns the top-level paths made.

    ``require``: glob patterns (``Train/0/*.bin``, one glob per path part) that must each match a
    file of the archive.  Raises :class:`ArchiveError` (a ``ValueError``) naming the archive and
    member for anything unsafe, corrupt, duplicated or missing, and ``FileExistsError`` when a
    top-level entry is already in ``dest``; ``dest`` is then unchanged.
    """
    archive, dest = Path(archive), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    with _open(archive) as (members, read):
        _refuse_duplicates(archive, members)
        missing = _missing(members, require)
        if missing:
            tops = ", ".join(sorted({m.parts[0] for m in members})[:5]) or "nothing"
            raise ArchiveError(f"{archive}: holds no file like {missing[0]!r} ({len(missing)} of the {len(require)} "
                               f"entries needed are missing; its top level: {tops}): not the expected archive; refused")
        _check_limits(archive, members, dest, limits)
        tops = sorted({m.parts[0] for m in members})
        clash = [t for t in tops if os.path.lexists(dest / t)]
        if clash:
            raise FileExistsError(f"{archive}: {', '.join(str(dest / t) for t in clash)} already exist(s); "
                                  f"move them away to unpack again")
        tmp = Path(tempfile.mkdtemp(prefix=f".{archive.name}.", suffix=".unpacking", dir=dest))
        try:
            for m in members:
                target = tmp.joinpath(*m.parts)
                if m.is_dir:
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    with read(m) as src:
                        _copy(archive, m, src, target)
                except (zipfile.BadZipFile, tarfile.TarError, EOFError) as e:
                    raise ArchiveError(f"{archive}: member {m.name!r} is corrupt ({e})") from None
            for t in tops:
                os.replace(tmp / t, dest / t)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return [dest / t for t in tops]
