"""Event readers: byte-exact fixtures written here for every format, the real sample files, bad input."""
import struct

import numpy as np
import pytest

from plif.data.events import (EVENT_DTYPE, EventFormatError, detect_format, event_info, read_aedat2, read_aedat4,
                              read_aedat31, read_events, read_nmnist_bin)
from plif.data.events.aedat4 import aedat4_layout

# ---------------------------------------------------------------- N-MNIST


def nmnist_event(x, y, p, t):
    return bytes([x, y, (p << 7) | (t >> 16), (t >> 8) & 0xFF, t & 0xFF])


def test_nmnist_byte_exact(tmp_path):
    raw = nmnist_event(0, 33, 1, 0) + nmnist_event(5, 6, 1, 70000) + nmnist_event(33, 0, 0, 0x7FFFFF)
    assert raw[:5] == b"\x00\x21\x80\x00\x00" and raw[12:15] == b"\x7f\xff\xff"
    f = tmp_path / "00001.bin"
    f.write_bytes(raw)
    ev = read_nmnist_bin(f)
    assert ev.dtype == EVENT_DTYPE
    assert ev["x"].tolist() == [0, 5, 33] and ev["y"].tolist() == [33, 6, 0]
    assert ev["p"].tolist() == [1, 1, 0] and ev["t"].tolist() == [0, 70000, 0x7FFFFF]


def test_nmnist_truncated_names_offset(tmp_path):
    f = tmp_path / "bad.bin"
    f.write_bytes(nmnist_event(1, 2, 0, 3) * 2 + b"\x01\x02")
    with pytest.raises(EventFormatError, match=r"bad.bin: byte offset 10: truncated event: 2 of 5"):
        read_nmnist_bin(f)


def test_nmnist_real_sample(shared_data):
    path = shared_data("nmnist") / "sample_nmnist.bin"
    raw = path.read_bytes()
    ev = read_events(path)
    assert detect_format(path) == "nmnist" and len(ev) == len(raw) // 5 == 4325
    # first event decoded by hand from bytes 07 0f 80 02 8e
    assert raw[:5] == b"\x07\x0f\x80\x02\x8e" and tuple(ev[0]) == (0x028E, 7, 15, 1)
    assert ev["x"].max() < 34 and ev["y"].max() < 34 and np.all(np.diff(ev["t"]) >= 0)
    info = event_info(path)
    assert info["sensor_size"] == (34, 34) and info["duration_us"] == int(ev["t"][-1] - ev["t"][0])

# ---------------------------------------------------------------- AEDAT 3.1

AEDAT31_HEADER = b"#!AER-DAT3.1\r\n#Format: RAW\r\n#Source 1: DVS128\r\n#Start-Time: 2017\r\n#!END-HEADER\r\n"


def pol_word(x, y, p, valid=1):
    return (x << 17) | (y << 2) | (p << 1) | valid


def packet(etype, size, events: bytes, number, overflow=0, ts_offset=4):
    return struct.pack("<hhiiiiii", etype, 1, size, ts_offset, overflow, number, number, number) + events


def pol_packet(evs, overflow=0):
    body = b"".join(struct.pack("<Ii", pol_word(x, y, p, v), ts) for x, y, p, ts, v in evs)
    return packet(1, 8, body, len(evs), overflow)


@pytest.fixture
def aedat31_file(tmp_path):
    special = packet(0, 8, struct.pack("<Ii", 0xDEADBEEF, 5), 1)  # skipped: not polarity
    imu = packet(3, 12, bytes(24), 2)  # skipped by size
    data = (AEDAT31_HEADER
            + pol_packet([(0, 0, 1, 10, 1), (127, 5, 0, 20, 1)])
            + special + imu
            + pol_packet([(3, 127, 1, 7, 1), (9, 9, 1, 8, 0), (64, 32, 0, 0x7FFFFFFF, 1)], overflow=1))
    f = tmp_path / "user01_lab.aedat"
    f.write_bytes(data)
    return f


def test_aedat31_multi_packet_overflow(aedat31_file):
    ev = read_aedat31(aedat31_file)
    assert ev["x"].tolist() == [0, 127, 3, 64]  # invalidated event (9, 9) dropped
    assert ev["y"].tolist() == [0, 5, 127, 32]
    assert ev["p"].tolist() == [1, 0, 1, 0]
    assert ev["t"].tolist() == [10, 20, (1 << 31) | 7, (1 << 31) | 0x7FFFFFFF]
    assert detect_format(aedat31_file) == "aedat3.1"
    np.testing.assert_array_equal(read_events(aedat31_file), ev)
    info = event_info(aedat31_file)
    assert info["format"] == "aedat3.1" and info["events"] == 4 and info["sensor_size"] == (128, 128)


def test_aedat31_wide_coordinates():
    from plif.data.events.aedat3 import parse_aedat31

    ev, header = parse_aedat31(AEDAT31_HEADER + pol_packet([(0x7FFF, 0x7FFF, 1, 1, 1)]))
    assert (ev["x"][0], ev["y"][0]) == (0x7FFF, 0x7FFF) and header[0] == "!AER-DAT3.1"


def test_aedat31_errors(tmp_path, aedat31_file):
    data = aedat31_file.read_bytes()
    h = len(AEDAT31_HEADER)
    cases = {
        "cut_header": (data[:h + 10], rf"byte offset {h}: truncated packet header: 10 of 28"),
        "overrun": (data[:h + 28 + 15], rf"byte offset {h}: packet of 2 x 8 bytes overruns the file \(15 bytes"),
        "no_end": (AEDAT31_HEADER.replace(b"#!END-HEADER\r\n", b""), rf"byte offset {h - 14}: header has no #!END-HEADER"),
        "open_line": (b"#!AER-DAT3.1\r\n#Format", r"byte offset 14: header line without end"),
        "magic": (b"#!AER-DAT3.0\r\n" + data[14:], r"byte offset 0: expected magic"),
        "size": (AEDAT31_HEADER + packet(1, 4, bytes(4), 1), rf"byte offset {h}: polarity packet with event size 4"),
        "zero_size": (AEDAT31_HEADER + packet(2, 0, b"", 3), rf"byte offset {h}: bad packet header: event size 0, event number 3"),
    }
    for name, (raw, msg) in cases.items():
        f = tmp_path / f"{name}.aedat"
        f.write_bytes(raw)
        with pytest.raises(EventFormatError, match=f"{name}.aedat: " + msg):
            read_aedat31(f)


def test_aedat31_empty_body(tmp_path):
    f = tmp_path / "e.aedat"
    f.write_bytes(AEDAT31_HEADER)
    ev = read_aedat31(f)
    assert ev.dtype == EVENT_DTYPE and len(ev) == 0

# ---------------------------------------------------------------- AEDAT 2.0

AEDAT2_HEADER = b"#!AER-DAT2.0\r\n# This is a raw AE data file - do not edit\r\n# AEChip: ch.unizh.ini.jaer.chip.retina.DVS128\r\n"


def aer2(events):
    return b"".join(struct.pack(">II", (y << 8) | (x << 1) | p | (ext << 15), t) for x, y, p, t, ext in events)


def test_aedat2_byte_exact(tmp_path):
    body = aer2([(0, 0, 1, 100, 0), (127, 3, 0, 200, 0), (5, 6, 1, 250, 1), (10, 127, 0, 300, 0)])
    assert body[:8] == b"\x00\x00\x00\x01\x00\x00\x00\x64"
    f = tmp_path / "cifar10_airplane_0.aedat"
    f.write_bytes(AEDAT2_HEADER + body)
    ev = read_aedat2(f)  # external event (bit 15) dropped
    assert ev["x"].tolist() == [127, 0, 117] and ev["y"].tolist() == [0, 3, 127]
    # raw bit 0 is jAER's type: 0 = ON, so p = 1 - bit (the third tuple field here is the raw bit)
    assert ev["p"].tolist() == [0, 1, 1] and ev["t"].tolist() == [100, 200, 300]
    assert read_aedat2(f, flip_x=False)["x"].tolist() == [0, 127, 10]
    assert detect_format(f) == "aedat2"
    assert read_events(f, flip_x=False)["x"].tolist() == [0, 127, 10]


def test_aedat2_timestamp_wrap(tmp_path):
    f = tmp_path / "w.aedat"
    f.write_bytes(AEDAT2_HEADER + aer2([(1, 1, 1, 0xFFFFFFF0, 0), (1, 1, 1, 0x10, 0), (1, 1, 1, 0x0F, 0)]))
    assert read_aedat2(f)["t"].tolist() == [0xFFFFFFF0, (1 << 32) + 0x10, (1 << 32) + 0x0F]


def test_aedat2_errors(tmp_path):
    f = tmp_path / "t.aedat"
    f.write_bytes(AEDAT2_HEADER + aer2([(1, 1, 1, 1, 0)]) + b"\x00\x01\x02")
    with pytest.raises(EventFormatError, match=rf"t.aedat: byte offset {len(AEDAT2_HEADER) + 8}: truncated event: 3 of 8"):
        read_aedat2(f)
    davis = AEDAT2_HEADER.replace(b"ch.unizh.ini.jaer.chip.retina.DVS128", b"eu.seebetter.ini.chips.davis.Davis346red")
    f.write_bytes(davis + aer2([(1, 1, 1, 1, 0)]))
    with pytest.raises(EventFormatError, match="Davis346red.*only the DVS128"):
        read_aedat2(f)


def test_aedat2_real_header(shared_data):
    path = shared_data("aedat2_header") / "sample_aedat_header.aedat"
    assert detect_format(path) == "aedat2"
    ev = read_events(path)
    assert len(ev) == 0 and ev.dtype == EVENT_DTYPE
    info = event_info(path)
    assert info["events"] == 0 and info["sensor_size"] == (260, 346) and info["duration_us"] == 0

# ---------------------------------------------------------------- AEDAT 4.0


def test_aedat4_real_sample(shared_data):
    pytest.importorskip("aedat")
    path = shared_data("aedat4") / "sample_dvxplorer.aedat4"
    assert detect_format(path) == "aedat4"
    ev, sensor = read_aedat4(path, with_sensor=True)
    # 111954 polarity events in 59 packets (tonic's 118651 counts 8-byte words of the whole file)
    assert len(ev) == 111954 and sensor == (240, 320)
    assert ev["x"].max() < 320 and ev["y"].max() < 240 and set(np.unique(ev["p"])) == {0, 1}
    assert np.all(np.diff(ev["t"]) >= 0) and ev["t"][0] == 1605537493718345
    assert aedat4_layout(path.read_bytes())["packets"] == {0: 59, 2: 59}


def test_aedat4_container_errors(tmp_path, shared_data):
    data = (shared_data("aedat4") / "sample_dvxplorer.aedat4").read_bytes()
    hlen = struct.unpack_from("<i", data, 14)[0]
    first = 18 + hlen
    f = tmp_path / "cut.aedat4"
    f.write_bytes(data[:first + 100])  # first packet cut; the data-table position now lies beyond the end
    size = struct.unpack_from("<i", data, first + 4)[0]
    with pytest.raises(EventFormatError, match=rf"cut.aedat4: byte offset {first}: packet of stream 0 with {size} bytes overruns"):
        read_aedat4(f)
    f.write_bytes(data[:16])
    with pytest.raises(EventFormatError, match=r"byte offset 14: truncated before the IOHeader length"):
        aedat4_layout(f.read_bytes(), f)

# ---------------------------------------------------------------- detection


def test_detection_by_content_not_extension(tmp_path, aedat31_file):
    odd = tmp_path / "sample.aedat"
    odd.write_bytes(nmnist_event(1, 2, 1, 3))
    assert detect_format(odd) == "nmnist"
    renamed = tmp_path / "x.bin"
    renamed.write_bytes(aedat31_file.read_bytes())
    assert detect_format(renamed) == "aedat3.1"
    old = tmp_path / "old.dat"
    old.write_bytes(b"#!AER-DAT1.0\r\n" + bytes(8))
    with pytest.raises(EventFormatError, match=r"old.dat: byte offset 0: unsupported AEDAT version line '#!AER-DAT1.0'"):
        read_events(old)
    txt = tmp_path / "notes.txt"
    txt.write_bytes(b"# some notes\n")
    with pytest.raises(EventFormatError, match="not a known event format"):
        detect_format(txt)


def test_load_event_frames_is_exported_lazily():
    import plif.data.events as events

    assert callable(events.load_event_frames) and "load_event_frames" in events.__all__
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        events.nope
