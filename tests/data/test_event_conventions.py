"""Conventions pinned by hand-written events whose meaning is known, strict detection, and errors
that name the file and byte offset (issue #12)."""
import struct

import numpy as np
import pytest

from plif.data.events import EventFormatError, detect_format, event_info, read_aedat2, read_events
from plif.data.events.aedat3 import parse_aedat31

HEADER2 = b"#!AER-DAT2.0\r\n# AEChip: ch.unizh.ini.jaer.chip.retina.DVS128\r\n"


def dvs128_addr(x_raw, y, type_bit):
    return (y << 8) | (x_raw << 1) | type_bit


def test_aedat2_polarity_and_orientation_follow_jaer_and_the_authors_reader(tmp_path):
    # jAER DVS128: type bit 0 = 0 is ON; the authors' CIFAR10-DVS reader: p = 1 - (addr & 1),
    # x = 127 - x_raw, y = y_raw
    f = tmp_path / "c.aedat"
    f.write_bytes(HEADER2 + struct.pack(">IIII", dvs128_addr(10, 20, 0), 1, dvs128_addr(10, 20, 1), 2))
    ev = read_aedat2(f)
    assert ev["p"].tolist() == [1, 0]  # ON first, then OFF
    assert ev["x"].tolist() == [117, 117] and ev["y"].tolist() == [20, 20]


def test_aedat2_davis_words_without_aechip_header_are_refused(tmp_path):
    # MATLAB saveaerdat writes no AEChip line; a DAVIS346 DVS event (x at bit 12, y at bit 22)
    davis = (100 << 22) | (200 << 12) | (1 << 11)
    f = tmp_path / "matlab.aedat"
    head = b"#!AER-DAT2.0\r\n# created by saveaerdat\r\n"
    f.write_bytes(head + struct.pack(">IIII", dvs128_addr(1, 1, 0), 5, davis, 6))
    with pytest.raises(EventFormatError, match=rf"matlab.aedat: byte offset {len(head) + 8}: address 0x{davis:08x} "
                                               r"sets bits above 15: a DAVIS-style.*no '# AEChip:' header"):
        read_events(f)
    # even under a DVS128 header such words are refused, never decoded as garbage
    g = tmp_path / "lying.aedat"
    g.write_bytes(HEADER2 + struct.pack(">II", davis, 6))
    with pytest.raises(EventFormatError, match=rf"byte offset {len(HEADER2)}: .*DAVIS"):
        read_aedat2(g)


def test_aedat31_polarity_and_orientation_follow_libcaer():
    # libcaer polarity event: bit 0 valid, bit 1 polarity (1 = ON), y at bits 2.., x at bits 17..;
    # DVS128 Gesture is used unflipped (x = column, y = row) as by the authors' and Tonic's readers
    header = b"#!AER-DAT3.1\r\n#!END-HEADER\r\n"
    on = (7 << 17) | (3 << 2) | (1 << 1) | 1
    off = (7 << 17) | (3 << 2) | 1
    body = struct.pack("<IiIi", on, 10, off, 11)
    pkt = struct.pack("<hhiiiiii", 1, 1, 8, 4, 0, 2, 2, 2) + body
    ev, _ = parse_aedat31(header + pkt)
    assert ev["p"].tolist() == [1, 0] and ev["x"].tolist() == [7, 7] and ev["y"].tolist() == [3, 3]


def test_nmnist_polarity_bit7_is_on(tmp_path):
    f = tmp_path / "n.bin"
    f.write_bytes(bytes([3, 4, 0x80, 0, 1]) + bytes([3, 4, 0x00, 0, 2]))
    ev = read_events(f)
    assert ev["p"].tolist() == [1, 0] and ev["x"].tolist() == [3, 3] and ev["y"].tolist() == [4, 4]


def test_headerless_file_is_nmnist_only_if_it_fits_the_sensor(tmp_path):
    rng = np.random.default_rng(0)
    noise = tmp_path / "noise.bin"
    noise.write_bytes(rng.integers(0, 256, 5000, dtype=np.uint8).tobytes())
    with pytest.raises(EventFormatError, match=r"noise.bin: byte offset \d+: not a recognised event file"):
        detect_format(noise)
    with pytest.raises(EventFormatError, match="not a recognised event file"):
        read_events(noise)
    csv = tmp_path / "labels.csv"
    csv.write_bytes(b"class,startTime_usec,endTime_usec\n1,100,20000\n2,12")  # 50 bytes: a multiple of 5
    assert len(csv.read_bytes()) % 5 == 0
    with pytest.raises(EventFormatError, match=r"labels.csv: byte offset 0: not a recognised event file"):
        event_info(csv)


def test_directory_given_as_file_names_it(tmp_path):
    d = tmp_path / "folder.aedat"
    d.mkdir()
    for fn in (read_events, detect_format, event_info):
        with pytest.raises(EventFormatError, match=r"folder.aedat: byte offset 0: is a directory"):
            fn(d)


def test_empty_recordings_read_but_info_warns(tmp_path):
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    assert len(read_events(empty)) == 0
    assert event_info(empty)["warnings"] and "no events" in event_info(empty)["warnings"][0]
    header_only = tmp_path / "h.aedat"
    header_only.write_bytes(HEADER2)
    info = event_info(header_only)
    assert info["events"] == 0 and info["warnings"]


def test_aedat4_decoding_error_names_the_packet_offset(tmp_path, shared_data):
    pytest.importorskip("aedat")
    from plif.data.events.aedat4 import aedat4_layout

    data = (shared_data("aedat4") / "sample_dvxplorer.aedat4").read_bytes()
    at = aedat4_layout(data)["offsets"][5]
    garbled = bytearray(data)
    garbled[at + 8 + 10:at + 8 + 60] = bytes(50)  # inside packet 5's compressed payload
    f = tmp_path / "garbled.aedat4"
    f.write_bytes(bytes(garbled))
    with pytest.raises(EventFormatError,
                       match=rf"garbled.aedat4: byte offset {at}: AEDAT 4 decoding failed in packet 5"):
        read_events(f)
