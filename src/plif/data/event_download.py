"""Download the event datasets that are published as plain files, and say how to get the one that is not.

* N-MNIST: ``Train.zip`` and ``Test.zip`` of the Mendeley Data record 468j46mzdv (Orchard et al.),
  with the URLs and MD5 sums Tonic lists; they unpack to ``Train/<digit>/*.bin`` and ``Test/...``.
* CIFAR10-DVS: ten per-class zip files on figshare (record 4724671), with the URLs and MD5 sums
  SpikingJelly lists; each unpacks to ``<class>/*.aedat``.
* DVS128 Gesture: IBM's box folder needs a browser, so :func:`manual_steps` prints what to do;
  once ``DvsGesture.tar.gz`` is in the folder it is checked (MD5) and unpacked like the others.

Each archive is fetched through :func:`plif.data.download.download_file` (mirrors, MD5, resume
of a ``.part`` left by an interrupted transfer), unpacked with :func:`plif.data.archive.extract_archive`
(no path traversal, links or bombs; moved into place only once complete), then a stamp
``.plif-unpacked/<archive>.md5`` records it so a second call does nothing.  The archive is removed
after unpacking unless ``keep_archives``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..atomic import atomic_write_text
from .archive import Limits, extract_archive
from .catalog import CIFAR10_CLASSES, default_root, get_dataset
from .download import download_file, file_md5

__all__ = ["Archive", "EVENT_ARCHIVES", "MANUAL_ARCHIVES", "download_event_dataset", "manual_steps", "dataset_root"]


@dataclass(frozen=True)
class Archive:
    filename: str
    urls: tuple[str, ...]
    md5: str


_MENDELEY = "https://data.mendeley.com/public-files/datasets/468j46mzdv/files/"
_FIGSHARE = "https://ndownloader.figshare.com/files/"
_CIFAR10_DVS_FILES = {  # class -> (figshare file id, md5), as SpikingJelly's CIFAR10DVS.resource_url_md5
    "airplane": ("7712788", "0afd5c4bf9ae06af762a77b180354fdd"),
    "automobile": ("7712791", "8438dfeba3bc970c94962d995b1b9bdd"),
    "bird": ("7712794", "a9c207c91c55b9dc2002dc21c684d785"),
    "cat": ("7712812", "52c63c677c2b15fa5146a8daf4d56687"),
    "deer": ("7712815", "b6bf21f6c04d21ba4e23fc3e36c8a4a3"),
    "dog": ("7712818", "f379ebdf6703d16e0a690782e62639c3"),
    "frog": ("7712842", "cad6ed91214b1c7388a5f6ee56d08803"),
    "horse": ("7712851", "e7cbbf77bec584ffbf913f00e682782a"),
    "ship": ("7712836", "41c7bd7d6b251be82557c6cce9a7d5c9"),
    "truck": ("7712839", "89f3922fd147d9aeff89e76a2b0b70a7"),
}

EVENT_ARCHIVES: dict[str, tuple[Archive, ...]] = {
    "nmnist": (
        Archive("Train.zip", (_MENDELEY + "39c25547-014b-4137-a934-9d29fa53c7a0/file_downloaded",),
                "20959b8e626244a1b502305a9e6e2031"),
        Archive("Test.zip", (_MENDELEY + "05a4d654-7e03-4c15-bdfa-9bb2bcbea494/file_downloaded",),
                "69ca8762b2fe404d9b9bad1103e97832"),
    ),
    "cifar10-dvs": tuple(Archive(f"{c}.zip", (_FIGSHARE + _CIFAR10_DVS_FILES[c][0],), _CIFAR10_DVS_FILES[c][1])
                         for c in CIFAR10_CLASSES),
}
_GESTURE_URL = "https://ibm.ent.box.com/s/3hiq58ww1pbbjrinh367ykfdf60xsfm8/folder/50167556794"
MANUAL_ARCHIVES: dict[str, tuple[Archive, ...]] = {
    "dvs128-gesture": (Archive("DvsGesture.tar.gz", (_GESTURE_URL,), "8a5c71fb11e24e5ca5b11866ca6c00a1"),),
}
_STAMPS = ".plif-unpacked"


def dataset_root(name: str, root: str | Path | None) -> Path:
    """Where the dataset's files go: ``root``, or ``$PLIF_DATA_ROOT/<name>`` (what the loaders read by default)."""
    return Path(root).expanduser() if root is not None else default_root() / name


def manual_steps(name: str, root: str | Path | None = None) -> str:
    """The exact steps for a dataset that cannot be fetched without a browser."""
    (a,) = MANUAL_ARCHIVES[name]
    folder = dataset_root(name, root)
    flag = "" if root is None else f" --root {folder}"
    return (f"{name} cannot be downloaded automatically (IBM's box folder needs a browser). Steps:\n"
            f"  1. open {a.urls[0]}\n"
            f"  2. download {a.filename} (md5 {a.md5}) into {folder}/\n"
            f"  3. run: plif data download {name}{flag}\n"
            f"     (checks the md5 and unpacks it safely to {folder}/DvsGesture/)")


def _stamp(root: Path, a: Archive) -> Path:
    return root / _STAMPS / f"{a.filename}.md5"


def _done(root: Path, a: Archive) -> bool:
    s = _stamp(root, a)
    return s.is_file() and s.read_text().strip() == a.md5


def _present(name: str, folder: Path) -> bool:
    """Whether the loaders already find both splits in ``folder`` (e.g. unpacked by hand)."""
    from .events.datasets import list_samples

    try:
        return all(list_samples(name, folder, train) for train in (True, False))
    except (FileNotFoundError, ValueError):
        return False


def _unpack(root: Path, a: Archive, path: Path, limits: Limits, keep: bool, log) -> None:
    log(f"  unpacking {path.name} ...")
    made = extract_archive(path, root, limits)
    atomic_write_text(_stamp(root, a), a.md5 + "\n")
    if not keep:
        path.unlink()
    log(f"  {path.name}: unpacked {', '.join(p.name for p in made)}")


def download_event_dataset(name: str, root: str | Path | None = None, keep_archives: bool = False,
                           limits: Limits = Limits(), timeout: float = 30.0, progress: bool | None = None,
                           log=print) -> Path:
    """Fetch, check and unpack every archive of event dataset ``name`` into its folder; returns the folder.

    Already unpacked archives (stamped) are skipped; a ``.part`` from an interrupted transfer is resumed.
    The URLs come from :data:`EVENT_ARCHIVES` (tests point them at a local server).  A dataset that
    needs a browser raises ``FileNotFoundError`` with :func:`manual_steps` unless its archive is
    already in the folder.  Download failures raise ``OSError`` naming every URL tried.
    """
    spec = get_dataset(name)
    if not spec.is_event:
        raise ValueError(f"{name} is a static dataset: plif downloads it when it is first loaded "
                         f"(plif data prepare {name})")
    table = {**EVENT_ARCHIVES, **MANUAL_ARCHIVES}
    if name not in table:
        raise ValueError(f"no download known for {name}")
    folder = dataset_root(name, root)
    manual = name in MANUAL_ARCHIVES
    todo = [a for a in table[name] if not _done(folder, a)]
    if not todo:
        log(f"{name}: already downloaded and unpacked in {folder}")
        return folder
    if len(todo) == len(table[name]) and _present(name, folder):
        log(f"{name}: already in {folder} (unpacked by hand); nothing to download")
        return folder
    if manual and not all((folder / a.filename).is_file() for a in todo):
        raise FileNotFoundError(manual_steps(name, root))
    folder.mkdir(parents=True, exist_ok=True)
    log(f"{name}: {len(todo)} of {len(table[name])} archives to {'check' if manual else 'fetch'} and unpack into {folder}")
    for i, a in enumerate(todo, 1):
        path = folder / a.filename
        if manual:
            got = file_md5(path)
            if got != a.md5:
                raise ValueError(f"{path}: md5 {got} != expected {a.md5} (incomplete or a different file; "
                                 f"download it again)")
        elif not (path.is_file() and file_md5(path) == a.md5):
            log(f"[{i}/{len(todo)}] {a.filename} <- {a.urls[0]}")
            try:
                download_file(list(a.urls), path, a.md5, timeout=timeout, progress=progress)
            except OSError as e:
                raise OSError(f"{name}: could not download {a.filename}: {e}. Run the same command again to "
                              f"resume, or put the file (md5 {a.md5}) into {folder}/ yourself") from None
        _unpack(folder, a, path, limits, keep_archives, log)
    log(f"{name}: ready in {folder}")
    return folder
