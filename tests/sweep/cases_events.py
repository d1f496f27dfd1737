"""Event files given to ``plif data info / frames / show`` as a user would: damaged real
recordings (N-MNIST, AEDAT 2.0 header, AEDAT 4.0), crafted AEDAT 2.0 / 3.1 files and bad options."""
from __future__ import annotations

import struct

from .case import Case
from .damage import (AEDAT2_HEADER, AEDAT31_HEADER, aedat2, aedat2_header_sample, aedat31, aedat31_packet,
                    aedat4_sample, need, nmnist_event, nmnist_sample, write)

AREA = "events"


def _mknod_full(path):
    import os
    import stat
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    except PermissionError:
        from .case import SkipCase
        raise SkipCase("mknod needs root") from None
CASES: list[Case] = []


def _file(name: str, make):
    """setup that writes ``make()`` (bytes) to ``{tmp}/<name>``."""
    return lambda tmp: write(tmp / name, make())


def warned(word: str):
    """check: a good-but-odd input (exit 0) must say ``word`` on stderr, or it passed without a word."""
    return lambda tmp, r: None if word in r.stderr else f"accepted without the warning {word!r}"


def add(name, make, actions=("info", "frames"), fname="rec.bin", expect="refuse", extra=(), warn=None):
    for act in actions:
        argv = ["data", act, "{tmp}/" + fname]
        if act in ("frames", "show"):
            argv += ["--T", "4", "--out", "{tmp}/out." + ("npy" if act == "frames" else "png")]
        CASES.append(Case(f"{act}-{name}", AREA, argv + list(extra), expect=expect, setup=_file(fname, make),
                          check=warned(warn) if warn else None))

# ---------------------------------------------------------------- N-MNIST, damaged

add("nmnist-good", nmnist_sample, ("info", "frames", "show"), expect="ok")
for cut in (1, 2, 3, 4):
    add(f"nmnist-truncated-{cut}", lambda cut=cut: nmnist_sample()[:-cut])
add("nmnist-one-byte", lambda: nmnist_sample()[:1])
add("nmnist-empty", lambda: b"", ("frames", "show"))
add("nmnist-empty-info", lambda: b"", ("info",), expect="ok", warn="no events")
add("nmnist-random-bytes", lambda: bytes((i * 7919 + 13) % 256 for i in range(5000)))
add("nmnist-text", lambda: b"hello, this is not an event file\n" * 20)
add("nmnist-all-ff", lambda: b"\xff" * 500)
add("nmnist-x-outside", lambda: nmnist_sample()[:500] + nmnist_event(40, 3, 1, 10**5))
add("nmnist-y-outside", lambda: nmnist_event(3, 34, 1, 5) + nmnist_sample()[:50])
add("nmnist-html-error-page", lambda: b"<html><body>404 Not Found</body></html>\n")
add("nmnist-gzip-of-it", lambda: __import__("gzip").compress(nmnist_sample()))
add("nmnist-zip-magic", lambda: b"PK\x03\x04" + bytes(200))
# ATIS has no magic number: time going backwards is what tells text or junk from a recording (issue 31)
add("nmnist-backwards-time", lambda: nmnist_event(1, 1, 1, 500) + nmnist_event(2, 2, 0, 100), ("frames", "info"))
add("nmnist-start-after-end", nmnist_sample, ("frames", "show"), extra=("--start", "1000", "--end", "0"))
add("nmnist-start-equals-end", nmnist_sample, ("frames",), extra=("--start", "5000", "--end", "5000"))
add("nmnist-cut-after-recording", nmnist_sample, ("frames", "show"), extra=("--start", "900000000"))
add("nmnist-cut-before-recording", nmnist_sample, ("frames",), extra=("--end", "1"))
add("nmnist-negative-cut", nmnist_sample, ("frames",), extra=("--start", "-100", "--end", "-1"))
add("nmnist-empty-allowed", lambda: b"", ("frames",), expect="ok", extra=("--allow-empty",))

# ---------------------------------------------------------------- options of frames / show

_OPTS = {
    "T-zero": ["--T", "0"], "T-negative": ["--T", "-3"], "T-huge": ["--T", "1000000000"],
    "T-float": ["--T", "2.5"], "T-word": ["--T", "ten"], "T-empty": ["--T", ""],
    "T-huger-than-int64": ["--T", "99999999999999999999"],
    "sensor-zero": ["--sensor", "0,0"], "sensor-zero-h": ["--sensor", "0,34"], "sensor-negative": ["--sensor", "-1,34"],
    "sensor-huge": ["--sensor", "100000,100000"], "sensor-x": ["--sensor", "34x34"], "sensor-one": ["--sensor", "34"],
    "sensor-three": ["--sensor", "34,34,2"], "sensor-words": ["--sensor", "a,b"], "sensor-too-small": ["--sensor", "20,20"],
    "sensor-float": ["--sensor", "34.0,34"], "sensor-int64": ["--sensor", "99999999999999999999,2"],
    "split-bogus": ["--split", "random"], "start-word": ["--start", "soon"], "end-float": ["--end", "1e3"],
}
for name, opt in _OPTS.items():
    for act in ("frames", "show") if name in ("T-huge", "sensor-zero", "sensor-huge", "T-zero") else ("frames",):
        argv = ["data", act, "{tmp}/rec.bin", "--out", "{tmp}/o." + ("npy" if act == "frames" else "png")]
        if "--T" not in opt:
            argv += ["--T", "4"]
        CASES.append(Case(f"{act}-opt-{name}", AREA, argv + opt, setup=_file("rec.bin", nmnist_sample)))
CASES.append(Case("info-opt-sensor-too-small", AREA, ["data", "info", "{tmp}/rec.bin", "--sensor", "20,20"],
                  setup=_file("rec.bin", nmnist_sample)))
CASES.append(Case("info-opt-sensor-zero", AREA, ["data", "info", "{tmp}/rec.bin", "--sensor", "0,0"],
                  setup=_file("rec.bin", nmnist_sample)))
CASES.append(Case("frames-sensor-larger-ok", AREA, ["data", "frames", "{tmp}/rec.bin", "--T", "2", "--sensor", "64,64",
                                                    "--out", "{tmp}/o.npy"], expect="ok", setup=_file("rec.bin", nmnist_sample)))

# ---------------------------------------------------------------- where the file / --out is

CASES += [
    Case("info-missing-file", AREA, ["data", "info", "{tmp}/nope.bin"]),
    Case("frames-missing-file", AREA, ["data", "frames", "{tmp}/nope.bin", "--T", "2", "--out", "{tmp}/o.npy"]),
    Case("info-directory", AREA, ["data", "info", "{tmp}"]),
    Case("info-dev-zero", AREA, ["data", "info", "/dev/zero"], timeout=30),
    Case("info-dev-null", AREA, ["data", "info", "/dev/null"], timeout=30),
    Case("info-fifo", AREA, ["data", "info", "{tmp}/fifo.bin"], timeout=30,
         setup=lambda tmp: __import__("os").mkfifo(tmp / "fifo.bin")),
    Case("info-dangling-symlink", AREA, ["data", "info", "{tmp}/link.bin"],
         setup=lambda tmp: (tmp / "link.bin").symlink_to(tmp / "gone.bin")),
    Case("info-symlink-loop", AREA, ["data", "info", "{tmp}/a.bin"],
         setup=lambda tmp: ((tmp / "a.bin").symlink_to(tmp / "b.bin"), (tmp / "b.bin").symlink_to(tmp / "a.bin"))),
    Case("frames-out-is-directory", AREA, ["data", "frames", "{tmp}/rec.bin", "--T", "2", "--out", "{tmp}/d"],
         setup=lambda tmp: (write(tmp / "rec.bin", nmnist_sample()), (tmp / "d").mkdir())),
    Case("frames-out-under-a-file", AREA, ["data", "frames", "{tmp}/rec.bin", "--T", "2", "--out", "{tmp}/rec.bin/o.npy"],
         setup=_file("rec.bin", nmnist_sample)),
    Case("frames-out-in-proc", AREA, ["data", "frames", "{tmp}/rec.bin", "--T", "2", "--out", "/proc/o.npy"],
         setup=_file("rec.bin", nmnist_sample)),
    # a device node of our own (never the system's /dev/full: a rename over it replaced it once)
    Case("frames-out-device-node", AREA, ["data", "frames", "{tmp}/rec.bin", "--T", "2", "--out", "{tmp}/full"],
         setup=lambda tmp: (write(tmp / "rec.bin", nmnist_sample()), _mknod_full(tmp / "full")),
         check=lambda tmp, r: None if (tmp / "full").is_char_device() else "the device node was replaced by a file"),
    Case("frames-no-out", AREA, ["data", "frames", "{tmp}/rec.bin", "--T", "2"], setup=_file("rec.bin", nmnist_sample)),
    Case("frames-no-T", AREA, ["data", "frames", "{tmp}/rec.bin", "--out", "{tmp}/o.npy"], setup=_file("rec.bin", nmnist_sample)),
    Case("data-no-action", AREA, ["data"]),
    Case("data-unknown-action", AREA, ["data", "convert", "x"]),
]

# ---------------------------------------------------------------- AEDAT 2.0

add("aedat2-header-sample-frames", aedat2_header_sample, ("frames", "show"), "rec.aedat")
add("aedat2-header-sample-info", aedat2_header_sample, ("info",), "rec.aedat", expect="ok",
    warn="no events")
add("aedat2-good", aedat2, ("info", "frames"), "rec.aedat", expect="ok")
add("aedat2-truncated-event", lambda: aedat2()[:-3], fname="rec.aedat")
add("aedat2-header-no-newline", lambda: b"#!AER-DAT2.0", fname="rec.aedat")
add("aedat2-davis-address", lambda: AEDAT2_HEADER.replace(b"\r\n# AEChip: ch.unizh.ini.jaer.chip.retina.DVS128", b"")
    + struct.pack(">II", 0x12345678, 5), fname="rec.aedat")
add("aedat2-davis-chip", lambda: aedat2(header=b"#!AER-DAT2.0\r\n# AEChip: eu.seebetter.ini.chips.davis.Davis346red\r\n"),
    fname="rec.aedat")
add("aedat2-only-external", lambda: AEDAT2_HEADER + struct.pack(">II", 1 << 15, 5) * 3, ("frames",), "rec.aedat")
add("aedat2-header-only", lambda: AEDAT2_HEADER, ("frames",), "rec.aedat")
add("aedat2-wrapping-time", lambda: aedat2([(1, 1, 1, 0xFFFFFFF0), (2, 2, 0, 0x10)]), ("frames",), "rec.aedat", expect="ok")
add("aedat2-backwards-time", lambda: aedat2([(1, 1, 1, 500), (2, 2, 0, 100)]), ("info",), "rec.aedat", expect="ok",
    warn="timestamps go backwards")
add("aedat-version-1", lambda: b"#!AER-DAT1.0\r\n" + bytes(16), fname="rec.aedat")
add("aedat-version-3.0", lambda: b"#!AER-DAT3.0\r\n#!END-HEADER\r\n" + bytes(16), fname="rec.aedat")
add("aedat-hash-text", lambda: b"# a comment\n1 2 3\n", fname="rec.aedat")

# ---------------------------------------------------------------- AEDAT 3.1 (crafted: no real recording here)

add("aedat31-good", aedat31, ("info", "frames"), "rec.aedat", expect="ok")
add("aedat31-negative-overflow", lambda: aedat31(overflow=-1), fname="rec.aedat")
add("aedat31-negative-ts", lambda: aedat31([(1, 1, 1, 5), (2, 2, 0, -7)]), fname="rec.aedat")
add("aedat31-overflow-int-min", lambda: aedat31(overflow=-2**31), ("frames",), "rec.aedat")
add("aedat31-backwards", lambda: aedat31([(1, 1, 1, 50), (2, 2, 0, 10)]), ("frames",), "rec.aedat", expect="ok",
    warn="timestamps go backwards")
add("aedat31-no-end-header", lambda: b"#!AER-DAT3.1\r\n#Source 1: DVS128\r\n" + bytes(40), fname="rec.aedat")
add("aedat31-truncated-packet-header", lambda: aedat31()[:len(AEDAT31_HEADER) + 10], fname="rec.aedat")
add("aedat31-truncated-payload", lambda: aedat31()[:-4], fname="rec.aedat")
add("aedat31-zero-size", lambda: AEDAT31_HEADER + aedat31_packet([], size=0, number=1), fname="rec.aedat")
add("aedat31-negative-number", lambda: AEDAT31_HEADER + aedat31_packet([], number=-5), fname="rec.aedat")
add("aedat31-huge-number", lambda: AEDAT31_HEADER + aedat31_packet([(1, 1, 1, 1)], number=2**31 - 1), fname="rec.aedat")
add("aedat31-polarity-size-12", lambda: AEDAT31_HEADER + aedat31_packet([], size=12, number=0), ("frames",), "rec.aedat")
add("aedat31-polarity-size-16", lambda: AEDAT31_HEADER + struct.pack("<hhiiiiii", 1, 1, 16, 4, 0, 1, 1, 1) + bytes(16),
    fname="rec.aedat")
add("aedat31-x-outside-dvs128", lambda: aedat31([(200, 5, 1, 10)]), fname="rec.aedat")
add("aedat31-header-only", lambda: AEDAT31_HEADER, ("frames",), "rec.aedat")
add("aedat31-all-invalid", lambda: AEDAT31_HEADER + struct.pack("<hhiiiiii", 1, 1, 8, 4, 0, 2, 2, 2)
    + struct.pack("<Ii", 4, 1) * 2, ("frames",), "rec.aedat")
add("aedat31-garbage-after-header", lambda: AEDAT31_HEADER + b"garbage!" * 5, fname="rec.aedat")

# ---------------------------------------------------------------- AEDAT 4.0: the real recording, damaged


def _a4(edit):
    return lambda: edit(bytearray(aedat4_sample()))


add("aedat4-good", aedat4_sample, ("info", "frames", "show"), "rec.aedat4", expect="ok")
for frac in (0.0001, 0.001, 0.01, 0.1, 0.3, 0.5, 0.9, 0.999):
    add(f"aedat4-truncated-{frac}", _a4(lambda b, frac=frac: bytes(b[:int(len(b) * frac)])), ("info",), "rec.aedat4")
add("aedat4-magic-only", lambda: b"#!AER-DAT4.0\r\n", fname="rec.aedat4")
add("aedat4-header-length-negative", _a4(lambda b: bytes(b[:14]) + struct.pack("<i", -5) + bytes(b[18:])), ("info",),
    "rec.aedat4")
add("aedat4-header-length-huge", _a4(lambda b: bytes(b[:14]) + struct.pack("<i", 2**31 - 1) + bytes(b[18:])), ("info",),
    "rec.aedat4")
add("aedat4-header-length-zero", _a4(lambda b: bytes(b[:14]) + struct.pack("<i", 0) + bytes(b[18:])), ("info",),
    "rec.aedat4")
for at in (20, 40, 60, 200, 1000, 2000):
    def flip(b, at=at):
        b[18 + at] ^= 0xFF
        return bytes(b)
    add(f"aedat4-header-byte-{at}-flipped", _a4(flip), ("info",), "rec.aedat4",
        expect="refuse")
for k in (0, 1, 10, 30, 58):
    def packet_junk(b, k=k):
        off = 18 + struct.unpack_from("<i", b, 14)[0]
        for _ in range(k):
            off += 8 + struct.unpack_from("<i", b, off + 4)[0]
        for i in range(off + 8, off + 40):
            b[i] ^= 0x5A
        return bytes(b)
    add(f"aedat4-packet-{k}-junk", _a4(packet_junk), ("info", "frames"), "rec.aedat4")
def _size_overrun(b):
    off = 18 + struct.unpack_from("<i", b, 14)[0]
    struct.pack_into("<i", b, off + 4, 2**30)
    return bytes(b)
add("aedat4-packet-size-overrun", _a4(_size_overrun), ("info",), "rec.aedat4")

# issue 53.10: a download whose recordings are all 0 bytes was called ready (a reader finds no events in an
# empty file, and no error); the archives lie in the folder with the record's MD5 (patched), so nothing is fetched
_EMPTY_DOWNLOAD = """
import hashlib, io, sys, zipfile
from dataclasses import replace
from plif.catalog import DATASETS
from plif.data.event_download import download_event_dataset
from pathlib import Path
folder = Path("nm"); folder.mkdir()
md5 = {}
for split in ("Train", "Test"):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for d in range(10):
            z.writestr(f"{split}/{d}/00000.bin", b"")
    (folder / f"{split}.zip").write_bytes(buf.getvalue())
    md5[f"{split}.zip"] = hashlib.md5(buf.getvalue()).hexdigest()
DATASETS["nmnist"] = replace(DATASETS["nmnist"], archives=tuple(replace(a, md5=md5[a.filename])
                                                                for a in DATASETS["nmnist"].archives))
try:
    download_event_dataset("nmnist", folder, progress=False)
except ValueError as e:
    print(f"python: error: {e}", file=sys.stderr)
    sys.exit(2)
"""


def _said_empty(tmp, r):
    return None if "empty (0 bytes)" in r.stderr else "the refusal does not say the recordings are empty"


CASES.append(Case("download-recordings-all-empty", AREA, run=lambda env: env.python(_EMPTY_DOWNLOAD),
                  check=_said_empty))
