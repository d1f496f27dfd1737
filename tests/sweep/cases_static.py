"""Static datasets (IDX files of Fashion-MNIST / MNIST, the CIFAR-10 python archive) damaged as a
user's disk, download or hand would damage them, given to ``plif data prepare`` and ``plif train``."""
from __future__ import annotations

import gzip
import io
import pickle
import shutil
import struct
import tarfile

import numpy as np

from .case import Case
from .damage import FM_FILES, fashion_copy, gz_bomb, need, shared, raw_idx, regzip, truncate_file, write

AREA = "static"
CASES: list[Case] = []


def prepare(split: str) -> list[str]:
    only = "--train-only" if split == "train" else "--test-only"
    return ["data", "prepare", "fashion-mnist", "--root", "{tmp}/d", "--no-download", only]


def damaged(role: str, edit):
    """setup: the four files copied to ``{tmp}/d``, then ``edit(path)`` applied to the file of ``role``."""
    def setup(tmp):
        d = fashion_copy(tmp / "d")
        edit(d / FM_FILES[role])
    return setup


def on_raw(fn):
    """An edit of the decompressed IDX bytes, written back gzipped."""
    return lambda p: regzip(p, fn(raw_idx(p)))


def on_raw_plain(fn):
    """The decompressed IDX bytes, edited, written back *unpacked* under the same name."""
    return lambda p: p.write_bytes(fn(raw_idx(p)))


def _swap_with(other_role):
    return lambda p: shutil.copyfile(p.parent / FM_FILES[other_role], p)


def _labels_value(v, at=0):
    def fn(raw):
        b = bytearray(raw)
        b[8 + at] = v
        return bytes(b)
    return fn


def _dims(fn_sizes):
    def fn(raw):
        ndim = raw[3]
        sizes = list(struct.unpack_from(f">{ndim}I", raw, 4))
        new = fn_sizes(sizes)
        return raw[:3] + bytes([len(new)]) + struct.pack(f">{len(new)}I", *new) + raw[4 + 4 * ndim:]
    return fn


# what is done to one file -> expected "refuse"
EDITS = {
    "missing": lambda p: p.unlink(),
    "empty": lambda p: p.write_bytes(b""),
    "gzip-empty": lambda p: p.write_bytes(gzip.compress(b"")),
    "gzip-truncated-half": lambda p: truncate_file(p, p.stat().st_size // 2),
    "gzip-truncated-tail": lambda p: truncate_file(p, p.stat().st_size - 5),
    "gzip-header-only": lambda p: truncate_file(p, 10),
    "gzip-flipped-middle": lambda p: p.write_bytes(p.read_bytes()[:p.stat().st_size // 2] + b"\x00\xff\x00"
                                                   + p.read_bytes()[p.stat().st_size // 2 + 3:]),
    "gzip-trailing-garbage": lambda p: p.write_bytes(p.read_bytes() + b"garbage"),
    "gzip-two-members": lambda p: p.write_bytes(p.read_bytes() * 2),
    "raw-truncated-payload": on_raw(lambda r: r[:-1]),
    "raw-truncated-header": on_raw(lambda r: r[:6]),
    "raw-trailing-bytes": on_raw(lambda r: r + b"\x00"),
    "raw-bad-magic-zero": on_raw(lambda r: b"\x01" + r[1:]),
    "raw-bad-type": on_raw(lambda r: r[:2] + b"\x07" + r[3:]),
    "raw-float-type": on_raw(lambda r: r[:2] + b"\x0d" + r[3:]),
    "raw-zero-ndim": on_raw(lambda r: r[:3] + b"\x00" + r[4:]),
    "raw-wrong-ndim": on_raw(lambda r: r[:3] + bytes([r[3] + 1]) + r[4:]),
    "raw-first-dim-plus-one": on_raw(_dims(lambda s: [s[0] + 1] + s[1:])),
    "raw-first-dim-zero": on_raw(_dims(lambda s: [0] + s[1:])),
    "raw-huge-dims": on_raw(_dims(lambda s: [0xFFFFFFFF] * len(s))),
    "unpacked-truncated": on_raw_plain(lambda r: r[:-3]),
    "unpacked-good-but-named-gz": on_raw_plain(lambda r: r[:1] + b"\x01" + r[2:]),
    "text-file": lambda p: p.write_text("404 Not Found\n"),
    "html-page-gzipped": lambda p: p.write_bytes(gzip.compress(b"<html>404</html>")),
    "directory": lambda p: (p.unlink(), p.mkdir()),
    "dangling-symlink": lambda p: (p.unlink(), p.symlink_to(p.parent / "gone.gz")),
    "symlink-loop": lambda p: (p.unlink(), p.symlink_to(p)),
    "fifo": lambda p: (p.unlink(), __import__("os").mkfifo(p)),
}
LABEL_EDITS = {
    "label-10": on_raw(_labels_value(10)),
    "label-255-last": on_raw(lambda r: r[:-1] + b"\xff"),
    "labels-of-other-split": None,  # filled per split below
    "images-in-place-of-labels": None,
}
IMAGE_EDITS = {
    # consistent IDX files of the wrong image size: 27x28, and [N, 784] as 2 dimensions
    "image-27-rows": on_raw(lambda r: r[:8] + struct.pack(">II", 27, 28) + r[16:16 + struct.unpack_from(">I", r, 4)[0] * 27 * 28]),
    "image-3-dims-as-2": on_raw(lambda r: r[:3] + b"\x02" + r[4:8] + struct.pack(">I", 784) + r[16:]),
    "labels-in-place-of-images": None,
}

for split in ("train", "test"):
    other = "test" if split == "train" else "train"
    for role in (f"{split}-images", f"{split}-labels"):
        for name, edit in EDITS.items():
            CASES.append(Case(f"{role}-{name}", AREA, prepare(split), setup=damaged(role, edit), timeout=60))
    for name, edit in LABEL_EDITS.items():
        if name == "labels-of-other-split":
            edit = _swap_with(f"{other}-labels")
        elif name == "images-in-place-of-labels":
            edit = _swap_with(f"{split}-images")
        CASES.append(Case(f"{split}-labels-{name}", AREA, prepare(split), setup=damaged(f"{split}-labels", edit)))
    for name, edit in IMAGE_EDITS.items():
        if name == "labels-in-place-of-images":
            edit = _swap_with(f"{split}-labels")
        CASES.append(Case(f"{split}-images-{name}", AREA, prepare(split), setup=damaged(f"{split}-images", edit)))

# the bomb of the issue: a small .gz whose IDX header declares 10000 labels and which expands to GiBs
CASES.append(Case("test-labels-gzip-bomb", AREA, prepare("test"), timeout=60, setup=damaged(
    "test-labels", lambda p: gz_bomb(p, raw_idx(p), 2048))))
CASES.append(Case("test-images-gzip-bomb", AREA, prepare("test"), timeout=60, setup=damaged(
    "test-images", lambda p: gz_bomb(p, raw_idx(p), 1024))))
CASES.append(Case("train-bomb-in-train", AREA, ["train", "--dataset", "fashion-mnist", "--data-dir", "{tmp}/d",
                                                "--epochs", "1", "--max-train-samples", "64", "--max-test-samples", "64",
                                                "--device", "cpu", "--out", "{tmp}/run"], timeout=120,
                  setup=damaged("train-labels", lambda p: gz_bomb(p, raw_idx(p), 2048))))
for name in ("label-10", "gzip-truncated-half", "raw-first-dim-plus-one"):
    role = "train-labels" if name == "label-10" else "train-images"
    edit = LABEL_EDITS.get(name) or EDITS[name]
    CASES.append(Case(f"train-cmd-{role}-{name}", AREA,
                      ["train", "--dataset", "fashion-mnist", "--data-dir", "{tmp}/d", "--epochs", "1",
                       "--max-train-samples", "64", "--max-test-samples", "64", "--device", "cpu", "--out", "{tmp}/run"],
                      setup=damaged(role, edit), timeout=120))
def _shared_mnist(tmp) -> None:
    need(shared("mnist_idx"))  # the case is skipped where the sweep's --shared folder has no MNIST


CASES += [
    Case("prepare-good", AREA, prepare("test"), expect="ok", setup=damaged("test-labels", lambda p: None)),
    Case("prepare-good-unpacked", AREA, prepare("test"), expect="ok",
         setup=damaged("test-labels", lambda p: (p.with_suffix("").write_bytes(raw_idx(p)), p.unlink()))),
    Case("prepare-root-missing", AREA, ["data", "prepare", "fashion-mnist", "--root", "{tmp}/nope", "--no-download"]),
    Case("prepare-root-is-file", AREA, ["data", "prepare", "fashion-mnist", "--root", "{tmp}/f", "--no-download"],
         setup=lambda tmp: write(tmp / "f", b"x")),
    Case("prepare-unknown-dataset", AREA, ["data", "prepare", "mnist2", "--root", "{tmp}"]),
    Case("prepare-mnist-shared-no-train-images", AREA, ["data", "prepare", "mnist", "--root", "{shared}/mnist_idx",
                                                        "--no-download", "--train-only"], setup=_shared_mnist),
    Case("prepare-mnist-shared-test-ok", AREA, ["data", "prepare", "mnist", "--root", "{shared}/mnist_idx",
                                                "--no-download", "--test-only"], expect="ok", setup=_shared_mnist),
    Case("train-data-dir-missing", AREA, ["train", "--dataset", "fashion-mnist", "--data-dir", "{tmp}/nope", "--epochs", "1",
                                          "--device", "cpu", "--out", "{tmp}/run"]),
]

# ---------------------------------------------------------------- CIFAR-10 python archive (crafted)


def _batch(n=4, label=3, shape=(None, 3072), extra=None) -> bytes:
    data = np.zeros((n, shape[1]), dtype=np.uint8)
    d = {b"data": data, b"labels": [label] * n}
    if extra:
        d.update(extra)
    return pickle.dumps(d, protocol=3)


class _Evil:
    def __reduce__(self):
        return (print, ("pwned",))


def _tar(members: dict, corrupt=None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, blob in members.items():
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    data = buf.getvalue()
    return corrupt(data) if corrupt else data


def _cifar(members=None, corrupt=None, raw=None):
    def setup(tmp):
        blob = raw if raw is not None else _tar(members if members is not None else {"test_batch": _batch()}, corrupt)
        write(tmp / "c" / "cifar-10-python.tar.gz", blob)
    return setup


def _cifar_bomb(tmp):
    """A tar.gz whose test_batch member is 256 MiB of zeros: small on disk, large when read."""
    import zlib
    path = tmp / "c" / "cifar-10-python.tar.gz"
    path.parent.mkdir(parents=True)
    info = tarfile.TarInfo("cifar-10-batches-py/test_batch")
    info.size = 256 << 20
    header = info.tobuf(format=tarfile.GNU_FORMAT)
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as f:
        f.write(comp.compress(header))
        for _ in range(256):
            f.write(comp.compress(bytes(1 << 20)))
        f.write(comp.compress(bytes(1024)))
        f.write(comp.flush())


_C = ["data", "prepare", "cifar10", "--root", "{tmp}/c", "--no-download", "--test-only"]
CASES += [
    Case("cifar-good", AREA, _C, expect="ok", setup=_cifar()),
    Case("cifar-truncated-archive", AREA, _C, setup=_cifar(corrupt=lambda d: d[:len(d) // 2])),
    Case("cifar-not-gzip", AREA, _C, setup=_cifar(raw=b"this is not an archive")),
    Case("cifar-empty-archive", AREA, _C, setup=_cifar(raw=b"")),
    Case("cifar-missing-batch", AREA, _C, setup=_cifar({"data_batch_1": _batch()})),
    Case("cifar-batch-not-pickle", AREA, _C, setup=_cifar({"test_batch": b"hello"})),
    Case("cifar-batch-evil-pickle", AREA, _C, setup=_cifar({"test_batch": pickle.dumps({b"data": _Evil()})}),
         check=lambda tmp, r: "pwned" in r.stdout and "the pickle ran code" or None),
    Case("cifar-batch-label-10", AREA, _C, setup=_cifar({"test_batch": _batch(label=10)})),
    Case("cifar-batch-label-negative", AREA, _C, setup=_cifar({"test_batch": _batch(label=-1)})),
    Case("cifar-batch-wrong-width", AREA, _C, setup=_cifar({"test_batch": _batch(shape=(None, 3000))})),
    Case("cifar-batch-no-labels", AREA, _C, setup=_cifar({"test_batch": pickle.dumps({b"data": np.zeros((2, 3072), np.uint8)})})),
    Case("cifar-batch-labels-short", AREA, _C, setup=_cifar({"test_batch": pickle.dumps(
        {b"data": np.zeros((3, 3072), np.uint8), b"labels": [1, 2]})})),
    Case("cifar-batch-is-list", AREA, _C, setup=_cifar({"test_batch": pickle.dumps([1, 2, 3])})),
    Case("cifar-tar-member-bomb", AREA, _C, setup=_cifar_bomb, timeout=120),
    Case("cifar-dir-missing-batch", AREA, _C, setup=lambda tmp: write(tmp / "c" / "cifar-10-batches-py" / "data_batch_1", _batch())),
    Case("cifar-dir-batch-truncated", AREA, _C, setup=lambda tmp: write(tmp / "c" / "cifar-10-batches-py" / "test_batch",
                                                                      _batch()[:-20])),
]
