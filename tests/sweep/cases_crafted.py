"""Crafted files: decompression and allocation bombs, and headers written to mislead a reader
(AEDAT 4 IOHeader flatbuffers and stream descriptions, AEDAT 3.1 packet headers, IDX sizes).
Every bomb here is sized so that the unfixed code fails fast or within the machine's memory."""
from __future__ import annotations

import struct

from .case import Case
from .damage import (AEDAT31_HEADER, FM_FILES, aedat31, aedat31_packet, aedat4_described, aedat4_parts, aedat4_sample,
                    aedat4_with_header, fashion_copy, flatbuffer_field, gz_bomb, io_header_with_description,
                    nmnist_event, nmnist_sample, nmnist_tree, raw_idx, write)

AREA = "crafted"
CASES: list[Case] = []


def _bomb(role, mib, head=None):
    def setup(tmp):
        d = fashion_copy(tmp / "d")
        p = d / FM_FILES[role]
        gz_bomb(p, head if head is not None else raw_idx(p), mib)
    return setup


def _prep(split):
    return ["data", "prepare", "fashion-mnist", "--root", "{tmp}/d", "--no-download",
            "--train-only" if split == "train" else "--test-only"]


# IDX: small .gz files that expand far beyond what their header declares, or declare absurd sizes
CASES += [
    Case("idx-labels-bomb-1gib", AREA, _prep("test"), setup=_bomb("test-labels", 1024), timeout=120),
    Case("idx-labels-bomb-64mib", AREA, _prep("train"), setup=_bomb("train-labels", 64), timeout=120),
    Case("idx-images-bomb-512mib", AREA, _prep("test"), setup=_bomb("test-images", 512), timeout=120),
    Case("idx-header-only-bomb", AREA, _prep("test"), timeout=120,
         setup=_bomb("test-labels", 256, head=b"\x00\x00\x08\x01" + struct.pack(">I", 10000))),
    Case("idx-declares-exabytes", AREA, _prep("test"), timeout=60,
         setup=_bomb("test-images", 1, head=b"\x00\x00\x08\x03" + struct.pack(">III", 0xFFFFFFFF, 0xFFFFFFFF, 28))),
    Case("idx-declares-64gib-labels", AREA, _prep("test"), timeout=60,
         setup=_bomb("test-labels", 1, head=b"\x00\x00\x0e\x01" + struct.pack(">I", 0xFFFFFFFF))),
    Case("idx-declares-255-dims", AREA, _prep("test"), timeout=60,
         setup=_bomb("test-labels", 0, head=b"\x00\x00\x08\xff" + struct.pack(">I", 2) * 255)),
]

# frame arrays sized by options or headers (TiBs: the unfixed code fails at once, never swaps)
_F = ["data", "frames", "{tmp}/rec.bin", "--out", "{tmp}/o.npy"]
_nm = lambda tmp: write(tmp / "rec.bin", nmnist_sample())  # noqa: E731
CASES += [
    Case("frames-T-1e9", AREA, _F + ["--T", "1000000000"], setup=_nm),
    Case("frames-T-1e12", AREA, _F + ["--T", "1000000000000"], setup=_nm),
    Case("frames-sensor-100000", AREA, _F + ["--T", "10", "--sensor", "100000,100000"], setup=_nm),
    Case("frames-sensor-65535", AREA, _F + ["--T", "100", "--sensor", "65535,65535"], setup=_nm),
    Case("frames-sensor-2e9", AREA, _F + ["--T", "1", "--sensor", "2000000000,2000000000"], setup=_nm),
    Case("show-T-1e9", AREA, ["data", "show", "{tmp}/rec.bin", "--out", "{tmp}/o.png", "--T", "1000000000"], setup=_nm),
    Case("frames-time-split-T-1e9", AREA, _F + ["--T", "1000000000", "--split", "time"], setup=_nm),
    Case("prepare-T-1e9", AREA, ["data", "prepare", "nmnist", "--root", "{tmp}/nm", "--T", "1000000000", "--test-only",
                                 "--cache-dir", "{tmp}/c", "--workers", "0", "--quiet"],
         setup=lambda tmp: nmnist_tree(tmp / "nm", 1, ("Test",))),
]


def _a4(make):
    return lambda tmp: write(tmp / "rec.aedat4", make())


def _desc(edit):
    return _a4(lambda: aedat4_described(edit))


def _size(w, h):
    return lambda d: d.replace(">320<", f">{w}<").replace(">240<", f">{h}<")


_A4F = ["data", "frames", "{tmp}/rec.aedat4", "--T", "10", "--out", "{tmp}/o.npy"]
_A4I = ["data", "info", "{tmp}/rec.aedat4"]
# AEDAT 4: a stream description claiming a huge sensor
CASES += [
    Case("aedat4-sensor-32767-frames", AREA, _A4F, setup=_desc(_size(32767, 32767))),
    Case("aedat4-sensor-32767-show", AREA, ["data", "show", "{tmp}/rec.aedat4", "--T", "10", "--out", "{tmp}/o.png"],
         setup=_desc(_size(32767, 32767))),
    Case("aedat4-sensor-smaller-than-events", AREA, _A4I, setup=_desc(_size(100, 100))),
    Case("aedat4-sensor-zero", AREA, _A4F, setup=_desc(_size(0, 0))),
    Case("aedat4-sensor-negative", AREA, _A4F, setup=_desc(_size(-320, 240))),
    Case("aedat4-sensor-not-a-number", AREA, _A4F, setup=_desc(_size("wide", 240))),
    Case("aedat4-description-rebuilt-ok", AREA, _A4I, expect="ok", setup=_desc(lambda d: d)),
]
# AEDAT 4: the IOHeader flatbuffer and its description, crafted
_real_header = lambda: aedat4_parts(aedat4_sample())[1]  # noqa: E731


def _hdr(fn):
    return _a4(lambda: aedat4_with_header(fn(bytearray(_real_header()))))


def _put(field, fmt, value, relative=0):
    def fn(b):
        at = flatbuffer_field(bytes(b), field)
        struct.pack_into(fmt, b, at + relative, value)
        return bytes(b)
    return fn


def _root(value):
    def fn(b):
        struct.pack_into("<I", b, 0, value)
        return bytes(b)
    return fn


def _vtable(value):
    def fn(b):
        table = struct.unpack_from("<I", b, 0)[0]
        struct.pack_into("<i", b, table, value)
        return bytes(b)
    return fn


def _desc_len(value):
    def fn(b):
        at = flatbuffer_field(bytes(b), 2)
        s = at + struct.unpack_from("<I", b, at)[0]
        struct.pack_into("<I", b, s, value)
        return bytes(b)
    return fn


HEADERS = {
    "header-random": lambda b: bytes((i * 2654435761 >> 7) & 0xFF for i in range(len(b))),
    "header-zeros": lambda b: bytes(len(b)),
    "header-ff": lambda b: b"\xff" * len(b),
    "header-4-bytes": lambda b: bytes(b[:4]),
    "header-half": lambda b: bytes(b[:len(b) // 2]),
    "root-offset-huge": _root(0x7FFFFFF0),
    "root-offset-zero": _root(0),
    "root-offset-odd": _root(3),
    "vtable-outside": _vtable(-100000),
    "vtable-negative-size": _vtable(2**31 - 1),
    "compression-99": _put(0, "<i", 99),
    "compression-negative": _put(0, "<i", -1),
    "table-position-negative": _put(1, "<q", -5),
    "table-position-inside-header": _put(1, "<q", 30),
    "table-position-beyond-end": _put(1, "<q", 10**12),
    "description-offset-outside": _put(2, "<I", 0x7FFFFFFF),
    "description-length-huge": _desc_len(0x7FFFFFFF),
    "description-length-zero": _desc_len(0),
}
for name, fn in HEADERS.items():
    for argv, act in ((_A4I, "info"), (_A4F, "frames")) if name in ("header-random", "compression-99") else ((_A4I, "info"),):
        CASES.append(Case(f"aedat4-{name}-{act}", AREA, argv, setup=_hdr(fn)))
_desc_raw = lambda text: _a4(lambda: aedat4_with_header(io_header_with_description(text)))  # noqa: E731
CASES += [
    Case("aedat4-description-not-xml", AREA, _A4I, setup=_desc_raw("this is not xml at all")),
    Case("aedat4-description-wrong-root", AREA, _A4I, setup=_desc_raw("<html><body/></html>")),
    Case("aedat4-description-unclosed", AREA, _A4I, setup=_desc_raw('<dv version="2.0"><node name="outInfo">')),
    Case("aedat4-description-no-streams", AREA, _A4I, setup=_desc_raw('<dv version="2.0"></dv>')),
    Case("aedat4-description-billion-laughs", AREA, _A4I, timeout=60, setup=_desc_raw(
        '<?xml version="1.0"?><!DOCTYPE dv [<!ENTITY a "aaaaaaaaaa">'
        + "".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(8))
        + ']><dv version="2.0">&i;</dv>')),
    Case("aedat4-description-latin1", AREA, _A4I, setup=_a4(lambda: aedat4_with_header(
        io_header_with_description("x").replace(b"x\x00", b"\xe9\x00")))),
    Case("aedat4-compression-none-on-lz4-data", AREA, _A4I, setup=_a4(lambda: aedat4_described(compression=0))),
    Case("aedat4-compression-zstd-on-lz4-data", AREA, _A4I, setup=_a4(lambda: aedat4_described(compression=3))),
]

# AEDAT 3.1 packet headers crafted to overflow or mislead
_A3 = ["data", "frames", "{tmp}/rec.aedat", "--T", "2", "--out", "{tmp}/o.npy"]
_a3 = lambda make: (lambda tmp: write(tmp / "rec.aedat", make()))  # noqa: E731
CASES += [
    Case("aedat31-number-times-size-overflows", AREA, _A3, setup=_a3(
        lambda: AEDAT31_HEADER + struct.pack("<hhiiiiii", 1, 1, 2**30, 4, 0, 8, 8, 8) + bytes(64))),
    Case("aedat31-size-huge", AREA, _A3, setup=_a3(lambda: AEDAT31_HEADER + aedat31_packet([], size=2**31 - 1, number=1))),
    Case("aedat31-skipped-type-overruns", AREA, _A3, setup=_a3(lambda: AEDAT31_HEADER + aedat31_packet([], etype=3, size=12,
                                                                                                      number=1000))),
    Case("aedat31-overflow-max", AREA, _A3, expect="ok", setup=_a3(lambda: aedat31(overflow=2**31 - 1))),
    Case("aedat31-many-empty-packets", AREA, _A3, timeout=60,
         setup=_a3(lambda: AEDAT31_HEADER + aedat31_packet([], number=0) * 200000)),
    Case("aedat31-header-line-without-end", AREA, _A3, setup=_a3(lambda: b"#!AER-DAT3.1\r\n#" + b"x" * 100000)),
    Case("aedat31-endless-header-lines", AREA, _A3, timeout=60, setup=_a3(lambda: b"#!AER-DAT3.1\r\n" + b"#\n" * 500000)),
    Case("nmnist-time-max", AREA, ["data", "frames", "{tmp}/rec.bin", "--T", "3", "--split", "time", "--out", "{tmp}/o.npy"],
         expect="ok", setup=lambda tmp: write(tmp / "rec.bin", nmnist_event(1, 1, 1, 0) + nmnist_event(2, 2, 0, 2**23 - 1))),
]
