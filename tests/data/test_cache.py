import struct

import numpy as np
import pytest
import torch

from plif.catalog import get_dataset
from plif.data.events import cache, load_event_frames
from plif.data.events.cache import build_frames_cache, count_dtype, load_cached
from plif.data.events.datasets import CIFAR10_CLASSES, EventSample, list_samples

from plif_testing import atis_bin, watch_chunk_builds

NMNIST = get_dataset("nmnist")
GESTURE = get_dataset("dvs128-gesture")
CIFAR10_DVS = get_dataset("cifar10-dvs")


def direct_count(x, y, p, T, H, W):
    """SPEC §4 by hand, one event at a time: the slow reference the cache must equal."""
    n = len(x)
    per = n // T
    F = np.zeros((T, 2, H, W))
    for i in range(n):
        j = T - 1 if per == 0 else min(i // per, T - 1)
        F[j, p[i], y[i], x[i]] += 1
    return F


def test_load_event_frames_nmnist_matches_direct_count(nmnist_root, tmp_path):
    root, truth = nmnist_root
    frames, labels = load_event_frames(NMNIST, root, 4, True, cache_dir=tmp_path / "c", workers=0, progress=False)
    assert frames.shape == (30, 4, 2, 34, 34) and labels.dtype == torch.int64
    assert frames.dtype == torch.uint8  # counts this small fit a byte
    assert labels.tolist() == [d for d, _ in truth]
    for i, (_, (x, y, p, t)) in enumerate(truth):
        np.testing.assert_array_equal(frames[i].numpy(), direct_count(x, y, p, 4, 34, 34))


def test_cache_reused_and_keyed_on_parameters(nmnist_root, tmp_path, monkeypatch):
    root, _ = nmnist_root
    c = tmp_path / "c"
    a, _ = load_event_frames(NMNIST, root, 4, True, cache_dir=c, workers=0, progress=False)

    def fail(*args, **kw):
        raise AssertionError("cache should have been reused")

    monkeypatch.setattr(cache, "_build_chunk", fail)
    b, _ = load_event_frames(NMNIST, root, 4, True, cache_dir=c, workers=0, progress=False)
    assert torch.equal(a, b)
    for kw in ({"T": 5}, {"split": "time"}):  # each changes the frames: a new cache must be built
        args = {"T": 4, "split": "count", **kw}
        with pytest.raises(AssertionError, match="reused"):
            load_event_frames(NMNIST, root, args["T"], True, split=args["split"], cache_dir=c, workers=0,
                              progress=False)
    (root / "Train" / "3" / "0.bin").write_bytes(atis_bin([(1, 2, 1, 7)]))  # a file changed
    with pytest.raises(AssertionError, match="reused"):
        load_event_frames(NMNIST, root, 4, True, cache_dir=c, workers=0, progress=False)


def test_parallel_build_equals_serial(nmnist_root, tmp_path):
    root, _ = nmnist_root
    samples = list_samples(NMNIST, root, True)
    serial = build_frames_cache(samples, tmp_path / "s", 3, "count", (34, 34), workers=0, chunk_size=4, progress=False)
    par = build_frames_cache(samples, tmp_path / "p", 3, "count", (34, 34), workers=2, chunk_size=4, progress=False)
    fs, ls = load_cached(serial)
    fp, lp = load_cached(par)
    np.testing.assert_array_equal(fs, fp)
    np.testing.assert_array_equal(ls, lp)
    assert not (par / "chunks").exists()


@pytest.mark.parametrize("workers", [0, 2])
def test_worker_error_names_file_and_stops(nmnist_root, tmp_path, workers):
    root, _ = nmnist_root
    bad = root / "Train" / "5" / "1.bin"
    bad.write_bytes(b"\x01\x02\x03\x04\x05\x06\x07")  # 7 bytes: not a whole number of 5-byte events
    samples = list_samples(NMNIST, root, True)
    with pytest.raises(RuntimeError, match=r"Train/5/1\.bin: EventFormatError: .*byte offset 5"):
        build_frames_cache(samples, tmp_path / "x", 3, "count", (34, 34), workers=workers, chunk_size=4, progress=False)
    assert not (tmp_path / "x" / "frames.npy").exists()


def test_interrupted_build_resumes(nmnist_root, tmp_path, monkeypatch):
    root, _ = nmnist_root
    samples = list_samples(NMNIST, root, True)
    calls = watch_chunk_builds(monkeypatch, kill_after=3)
    with pytest.raises(KeyboardInterrupt):
        build_frames_cache(samples, tmp_path / "r", 2, "count", (34, 34), workers=0, chunk_size=4, progress=False)
    assert len(list((tmp_path / "r" / "chunks").glob("chunk_*.npy"))) == 3
    monkeypatch.undo()
    calls = watch_chunk_builds(monkeypatch)
    build_frames_cache(samples, tmp_path / "r", 2, "count", (34, 34), workers=0, chunk_size=4, progress=False)
    assert len(calls) == 8 - 3  # 30 samples in 8 chunks, 3 were already on disk
    full = build_frames_cache(samples, tmp_path / "full", 2, "count", (34, 34), workers=0, chunk_size=4, progress=False)
    np.testing.assert_array_equal(load_cached(tmp_path / "r")[0], load_cached(full)[0])


def aedat31_bytes(packets):
    """``packets``: list of (type, overflow, [(x, y, p, ts), ...]); polarity events marked valid."""
    out = [b"#!AER-DAT3.1\r\n#Format: RAW\r\n#Source 1: DVS128\r\n#!END-HEADER\r\n"]
    for etype, ovf, evs in packets:
        size = 8
        out.append(struct.pack("<hhiiiiii", etype, 1, size, 4, ovf, len(evs), len(evs), len(evs)))
        for x, y, p, ts in evs:
            out.append(struct.pack("<Ii", (x << 17) | (y << 2) | (p << 1) | 1, ts))
    return b"".join(out)


def test_dvs128_gesture_cut_into_samples(tmp_path):
    rng = np.random.default_rng(1)
    d = tmp_path / "DvsGesture"
    d.mkdir()
    evs = [(int(rng.integers(128)), int(rng.integers(128)), int(rng.integers(2)), ts) for ts in range(0, 3000, 7)]
    packets = [(1, 0, evs[:200]), (2, 0, [(0, 0, 0, 0)] * 3), (1, 0, evs[200:])]  # a non-polarity packet between
    (d / "user01_natural.aedat").write_bytes(aedat31_bytes(packets))
    (d / "user01_natural_labels.csv").write_text("class,startTime_usec,endTime_usec\n3,100,1100\n8,1500,2900\n8,2000,2001\n")
    (d / "trials_to_train.txt").write_text("user01_natural.aedat\n")
    with pytest.raises(RuntimeError, match=r"user01_natural.aedat: EmptyRecordingError: empty recording: no events in its "
                                           r"cut \[2000, 2001\) us"):
        load_event_frames(GESTURE, tmp_path, 5, True, cache_dir=tmp_path / "c", workers=0, progress=False)
    frames, labels = load_event_frames(GESTURE, tmp_path, 5, True, cache_dir=tmp_path / "c", workers=0,
                                       progress=False, allow_empty=True)
    assert frames.shape == (3, 5, 2, 128, 128) and labels.tolist() == [2, 7, 7]
    for i, (a, b) in enumerate([(100, 1100), (1500, 2900), (2000, 2001)]):
        sel = [e for e in evs if a <= e[3] < b]
        x, y, p, _ = map(np.array, zip(*sel)) if sel else ([], [], [], [])
        np.testing.assert_array_equal(frames[i].numpy(), direct_count(x, y, p, 5, 128, 128))
    assert frames[2].sum() == 0  # no event in [2000, 2001): zeros of the full shape


def test_cifar10_dvs_orientation_is_part_of_the_key(tmp_path):
    rng = np.random.default_rng(2)
    raw = {}
    for cls in CIFAR10_CLASSES:
        for k in range(1, 11):
            n = 12
            x, y, p = rng.integers(0, 128, n), rng.integers(0, 128, n), rng.integers(0, 2, n)
            addr = (y << 8) | (x << 1) | p
            body = b"".join(struct.pack(">II", int(a), int(t)) for a, t in zip(addr, range(0, 10 * n, 10)))
            ext = struct.pack(">II", (1 << 15) | 5, 999)  # external event: dropped
            f = tmp_path / "dvs" / cls / f"cifar10_{cls}_{k}.aedat"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(b"#!AER-DAT2.0\r\n# AEChip: ch.unizh.ini.jaer.chip.retina.DVS128\r\n" + body + ext)
            raw[(cls, k)] = (x, y, p)
    c = tmp_path / "c"
    flipped, labels = load_event_frames(CIFAR10_DVS, tmp_path / "dvs", 4, False, cache_dir=c, workers=0, progress=False)
    plain, _ = load_event_frames(CIFAR10_DVS, tmp_path / "dvs", 4, False, cache_dir=c, workers=0, progress=False,
                                 flip_x=False)
    assert flipped.shape == (10, 4, 2, 128, 128) and labels.tolist() == list(range(10))
    x, y, p = raw[("bird", 10)]
    on = 1 - p  # p here is jAER's raw type bit: 0 = ON
    np.testing.assert_array_equal(plain[2].numpy(), direct_count(x, y, on, 4, 128, 128))
    np.testing.assert_array_equal(flipped[2].numpy(), direct_count(127 - x, y, on, 4, 128, 128))
    assert len(list(c.iterdir())) == 2


def test_count_dtype():
    assert count_dtype(255) == np.uint8 and count_dtype(256) == np.int16 and count_dtype(40000) == np.int32


def test_real_nmnist_sample_through_cache(shared_data, tmp_path):
    src = shared_data("nmnist") / "sample_nmnist.bin"
    s = [EventSample(str(src), 3)]
    folder = build_frames_cache(s, tmp_path / "n", 10, "count", (34, 34), workers=0, progress=False)
    frames, labels = load_cached(folder)
    data = np.frombuffer(src.read_bytes(), np.uint8).reshape(-1, 5)
    x, y, p = data[:, 0].astype(int), data[:, 1].astype(int), (data[:, 2] >> 7).astype(int)
    np.testing.assert_array_equal(frames[0], direct_count(x, y, p, 10, 34, 34))
    assert frames[0].sum() == len(data) == 21625 // 5 and labels.tolist() == [3]


def test_root_none_uses_default_root(tmp_path, monkeypatch):
    monkeypatch.setenv("PLIF_DATA_ROOT", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "nmnist")):
        load_event_frames(NMNIST, None, 4, True, workers=0, progress=False)
