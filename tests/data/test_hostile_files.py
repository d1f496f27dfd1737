"""Hostile data files (issue #22): bombs, crafted headers and impossible timestamps are refused in
one line naming the file, offset or option, before anything large is allocated."""
import gzip
import struct
import zlib

import numpy as np
import pytest

from plif.catalog import get_dataset
from plif.data.events import EventFormatError, read_events
from plif.data.frames import check_frame_shape, events_to_frames
from plif.data.idx import read_idx
from plif.data.memory import MemoryBudgetError, check_fits_memory
from plif_testing import idx_bytes

AEDAT31_HEADER = b"#!AER-DAT3.1\r\n#Source 1: DVS128\r\n#!END-HEADER\r\n"


def pol_packet(evs, overflow=0):
    """One AEDAT 3.1 polarity packet of ``(x, y, p, ts, valid)`` events."""
    body = b"".join(struct.pack("<Ii", (x << 17) | (y << 2) | (p << 1) | v, ts) for x, y, p, ts, v in evs)
    return struct.pack("<hhiiiiii", 1, 1, 8, 4, overflow, len(evs), len(evs), len(evs)) + body


def test_gzip_bomb_is_read_only_up_to_the_declared_size(tmp_path, monkeypatch):
    # 10 labels declared, 64 MiB of zeros after them: compresses to ~64 KiB
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    blob = comp.compress(idx_bytes(np.arange(10, dtype=np.uint8)))
    for _ in range(64):
        blob += comp.compress(bytes(1 << 20))
    f = tmp_path / "train-labels-idx1-ubyte.gz"
    f.write_bytes(blob + comp.flush())
    seen = []
    real_read = gzip.GzipFile.read
    monkeypatch.setattr(gzip.GzipFile, "read", lambda self, n=-1: seen.append(n) or real_read(self, n))
    with pytest.raises(ValueError, match=r"decompresses to more than the 18 bytes its IDX header declares"):
        read_idx(f)
    assert -1 not in seen and sum(seen) <= 19  # never a whole-stream read
    f.write_bytes(gzip.compress(idx_bytes(np.arange(10, dtype=np.uint8))))  # an intact file still reads
    assert read_idx(f).tolist() == list(range(10))


def test_idx_header_declaring_more_than_memory(tmp_path):
    f = tmp_path / "x.gz"
    f.write_bytes(gzip.compress(b"\x00\x00\x08\x03" + struct.pack(">III", 0xFFFFFFFF, 0xFFFFFF, 28)))
    with pytest.raises(MemoryBudgetError, match=r"x.gz: the IDX data its header declares .* more than the"):
        read_idx(f)


@pytest.mark.parametrize("T,sensor,match", [
    (10**9, (34, 34), r"frames \[1000000000, 2, 34, 34\] .*needs 25.2 TiB, more than .*lower --T"),
    (10, (100000, 100000), r"frames \[10, 2, 100000, 100000\] .*needs 2.2 TiB"),
    (10, (0, 0), r"sensor size \(H, W\) = \(0, 0\): both must be >= 1 \(--sensor H,W\)"),
    (0, (34, 34), r"T must be >= 1"),
])
def test_frame_arrays_are_sized_before_allocation(T, sensor, match):
    ev = np.zeros(3, dtype=[("t", "<i8"), ("x", "<u2"), ("y", "<u2"), ("p", "i1")])
    with pytest.raises(ValueError, match=match):
        events_to_frames(ev, T, sensor)


def test_memory_check_counts_the_chunk_and_names_the_hint():
    check_frame_shape(10, (34, 34), samples=64)
    with pytest.raises(MemoryBudgetError, match=r"frames \[10000000, 1000, 2, 34, 34\].* lower T"):
        check_frame_shape(1000, (34, 34), samples=10**7, hint="lower T")
    with pytest.raises(MemoryBudgetError, match=r"^x needs 2.0 KiB, more than the 1.0 KiB of memory available; y$"):
        check_fits_memory(2048, "x", "y", available=1024)


def _aedat4_with_header(shared_data, tmp_path, header: bytes):
    data = (shared_data("aedat4") / "sample_dvxplorer.aedat4").read_bytes()
    hlen = struct.unpack_from("<i", data, 14)[0]
    f = tmp_path / "x.aedat4"
    f.write_bytes(data[:14] + struct.pack("<i", len(header)) + header + data[18 + hlen:])
    return f, data[18:18 + hlen]


def test_aedat4_junk_io_header_is_refused_before_the_decoder(shared_data, tmp_path, capfd):
    pytest.importorskip("aedat")
    f, real = _aedat4_with_header(shared_data, tmp_path, bytes(range(256)) * 9)
    with pytest.raises(EventFormatError, match=r"x.aedat4: byte offset 18: IOHeader: root table offset \d+ outside"):
        read_events(f)
    bad_comp = bytearray(real)
    table = struct.unpack_from("<I", real, 0)[0]
    vtable = table - struct.unpack_from("<i", real, table)[0]
    at = table + struct.unpack_from("<H", real, vtable + 4)[0]
    struct.pack_into("<i", bad_comp, at, 77)
    f, _ = _aedat4_with_header(shared_data, tmp_path, bytes(bad_comp))
    with pytest.raises(EventFormatError, match=rf"byte offset {18 + at}: IOHeader: unknown compression 77"):
        read_events(f)
    assert "panicked" not in capfd.readouterr().err


def test_aedat4_decoder_panic_is_one_error(shared_data, tmp_path, monkeypatch, capfd):
    aedat = pytest.importorskip("aedat")

    class Boom(BaseException):
        pass
    Boom.__name__ = "PanicException"

    def panic(path):
        import os
        os.write(2, b"thread '<unnamed>' panicked at src/lib.rs: index out of range\n")
        raise Boom("range start index 9 out of range")
    monkeypatch.setattr(aedat, "Decoder", panic)
    with pytest.raises(EventFormatError, match=r"decoding failed in the IOHeader: range start index 9"):
        read_events(shared_data("aedat4") / "sample_dvxplorer.aedat4")
    assert "panicked" not in capfd.readouterr().err


def test_aedat31_negative_overflow_counter_and_timestamp(tmp_path):
    f = tmp_path / "neg.aedat"
    f.write_bytes(AEDAT31_HEADER + pol_packet([(1, 1, 1, 5, 1)], overflow=-3))
    with pytest.raises(EventFormatError, match=rf"byte offset {len(AEDAT31_HEADER) + 12}: negative timestamp overflow"):
        read_events(f)
    f.write_bytes(AEDAT31_HEADER + pol_packet([(1, 1, 1, 5, 1)]) + pol_packet([(1, 1, 1, 7, 1), (2, 2, 0, -4, 1)]))
    at = len(AEDAT31_HEADER) + 28 + 8 + 28 + 8 + 4
    with pytest.raises(EventFormatError, match=rf"byte offset {at}: negative timestamp -4 us \(event 2\)"):
        read_events(f)


def test_pipes_and_devices_are_never_read(tmp_path):
    import os

    fifo = tmp_path / "rec.bin"
    os.mkfifo(fifo)  # reading it would block forever
    with pytest.raises(EventFormatError, match="rec.bin: byte offset 0: is not a regular file"):
        read_events(fifo)
    with pytest.raises(EventFormatError, match="/dev/zero: byte offset 0: is not a regular file"):
        read_events("/dev/zero")  # would never end
    with pytest.raises(ValueError, match="rec.bin: not a regular file"):
        read_idx(fifo)


def test_aedat4_cut_inside_its_data_table(shared_data, tmp_path):
    data = (shared_data("aedat4") / "sample_dvxplorer.aedat4").read_bytes()
    f = tmp_path / "x.aedat4"
    f.write_bytes(data[:-900])  # every packet intact, the data table (an index) cut: an unfinished download
    with pytest.raises(EventFormatError, match=r"data table's LZ4 frame is cut short: file truncated"):
        read_events(f)
    f.write_bytes(data + b"xx")
    with pytest.raises(EventFormatError, match=r"followed by 2 stray bytes"):
        read_events(f)


def test_out_that_is_a_device_is_never_replaced(tmp_path, capsys):
    import os
    import stat

    from plif.cli.main import main
    node = tmp_path / "full"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    except PermissionError:
        pytest.skip("mknod needs root")
    rec = tmp_path / "a.bin"
    rec.write_bytes(bytes([1, 2, 0x80, 0, 5]))
    assert main(["data", "frames", str(rec), "--T", "1", "--out", str(node)]) == 2
    assert "exists and is not a regular file" in capsys.readouterr().err
    assert node.is_char_device()


def test_cifar_archive_member_larger_than_a_batch_is_not_read(tmp_path, monkeypatch):
    import tarfile

    from plif.data import static
    monkeypatch.setattr(static, "CIFAR_BATCH_MAX", 1 << 20)  # the same rule, at a size a test can afford
    info = tarfile.TarInfo("cifar-10-batches-py/test_batch")
    info.size = 2 << 20
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    blob = comp.compress(info.tobuf(format=tarfile.GNU_FORMAT)) + comp.compress(bytes((2 << 20) + 1024)) + comp.flush()
    (tmp_path / "cifar-10-python.tar.gz").write_bytes(blob)
    with pytest.raises(ValueError, match=r"test_batch claims 2097152 bytes, more than a CIFAR-10 batch"):
        static.load_static(get_dataset("cifar10"), tmp_path, train=False, download=False)
