"""SHD / SSC: the HDF5 spike files in their published layout (written here with h5py), read strictly,
integrated into frames [T, 700] by the event datasets' slicing, cached and fingerprinted."""
import gzip
import os

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")

from plif_testing import spike_samples, write_shd, write_spike_file  # noqa: E402

from plif.catalog import DATASETS  # noqa: E402
from plif.data.events.datasets import list_samples  # noqa: E402
from plif.data.events.load import load_event_frames  # noqa: E402
from plif.data.events.spike_h5 import SpikeFileError, read_spike_labels, read_spike_sample  # noqa: E402


def _reference_frames(times, units, T, split, channels=700):
    """An independent integration of one sample, spike by spike in Python integers: slice j of spike
    i is i // floor(N/T) capped at T-1 (all in the last slice when N < T) by count; by time the
    spike's whole microsecond u lands in slice (u - u_first) * T // (u_last - u_first + 1)."""
    frames = np.zeros((T, channels), dtype=np.int64)
    n = len(times)
    us = [int(round(float(t) * 1e6)) for t in times]
    for i in range(n):
        if split == "count":
            per = n // T
            j = T - 1 if per == 0 else min(i // per, T - 1)
        else:
            j = (us[i] - min(us)) * T // (max(us) - min(us) + 1)
        frames[j, int(units[i])] += 1
    return frames


def test_the_reader_gives_each_sample_as_events_of_a_one_row_sensor(tmp_path):
    times, units, labels = spike_samples(5, 0)
    times[2] = np.array([0.0015, 0.25, 1.2999999], dtype=np.float32)  # whole microseconds by rounding
    units[2] = np.array([0, 699, 3], dtype=np.uint16)
    write_spike_file(tmp_path / "shd_train.h5", times, units, labels)
    assert read_spike_labels(tmp_path / "shd_train.h5", 20).tolist() == labels.tolist()
    ev = read_spike_sample(tmp_path / "shd_train.h5", 2)
    assert ev["t"].tolist() == [1500, 250000, 1300000] and ev["x"].tolist() == [0, 699, 3]
    assert not ev["y"].any() and not ev["p"].any()
    assert DATASETS["shd"].sensor_size == (700,) and DATASETS["ssc"].num_classes == 35


@pytest.mark.parametrize("split", ["count", "time"])
def test_shd_frames_equal_an_independent_integration(tmp_path, split):
    root = write_shd(tmp_path / "shd", train=12, test=4)
    times, units, labels = spike_samples(12, 0)
    times[3], units[3] = times[3][:3], units[3][:3]  # fewer spikes than T: all in the last frame by count
    times[5], units[5] = np.zeros(0, np.float32), np.zeros(0, np.uint16)  # a silent sample
    write_spike_file(root / "shd_train.h5", times, units, labels)
    frames, y = load_event_frames("shd", root, T=7, train=True, split=split, cache_dir=tmp_path / "cache",
                                  workers=0, progress=False, allow_empty=True)
    assert tuple(frames.shape) == (12, 7, 700) and y.tolist() == labels.tolist()
    for i in range(12):
        assert np.array_equal(frames[i].numpy(), _reference_frames(times[i], units[i], 7, split)), i


def test_a_silent_sample_is_refused_unless_allowed(tmp_path):
    root = write_shd(tmp_path / "shd", train=6, test=2)
    times, units, labels = spike_samples(6, 0)
    times[4], units[4] = np.zeros(0, np.float32), np.zeros(0, np.uint16)
    write_spike_file(root / "shd_train.h5", times, units, labels)
    with pytest.raises(RuntimeError, match=r"shd_train.h5: EmptyRecordingError: empty recording"):
        load_event_frames("shd", root, T=4, train=True, cache_dir=tmp_path / "c", workers=0, progress=False)


def test_the_list_reads_each_split_file_and_the_copy_of_a_split_is_refused(tmp_path):
    root = write_shd(tmp_path / "shd", train=6, test=3)
    tr, te = (list_samples("shd", root, train=t) for t in (True, False))
    assert [s.index for s in tr] == list(range(6)) and {s.path for s in te} == {str(root / "shd_test.h5")}
    assert list_samples("shd", tmp_path, train=True) == tr  # the parent folder: <root>/shd/ is searched
    (root / "shd_test.h5").write_bytes((root / "shd_train.h5").read_bytes())
    with pytest.raises(ValueError, match=r"shd_train.h5 \(train\) holds the same bytes as .*shd_test.h5 \(test\)"):
        load_event_frames("shd", root, T=4, train=True, cache_dir=tmp_path / "c", workers=0, progress=False)


def test_an_edited_split_file_rebuilds_its_cache(tmp_path, capsys):
    root = write_shd(tmp_path / "shd", train=6, test=2)
    a, _ = load_event_frames("shd", root, T=4, train=True, cache_dir=tmp_path / "c", workers=0, progress=False)
    times, units, labels = spike_samples(6, 0)
    units[0] = (units[0] + 1) % 700  # the same size, one sample's channels changed
    write_spike_file(root / "shd_train.h5", times, units, labels)
    b, _ = load_event_frames("shd", root, T=4, train=True, cache_dir=tmp_path / "c", workers=0, progress=False)
    assert "rebuilding the frame cache" in capsys.readouterr().err
    assert not np.array_equal(a[0].numpy(), b[0].numpy()) and np.array_equal(a[1:].numpy(), b[1:].numpy())


def test_a_split_file_is_hashed_once_per_build_not_once_per_chunk(tmp_path, monkeypatch):
    from plif.data.events import cache

    root = write_shd(tmp_path / "shd", train=20, test=2)
    calls = []
    real = cache.fingerprint
    monkeypatch.setattr(cache, "fingerprint", lambda p: calls.append(p) or real(p))
    folder = tmp_path / "c"
    from plif.data.events.cache import build_frames_cache

    samples = list_samples("shd", root, train=True)
    build_frames_cache(samples, folder, 4, "count", (700,), chunk_size=4, workers=0, progress=False)
    assert calls == [str(root / "shd_train.h5")]  # 5 chunks, one hash


# ------------------------------------------------------------------ bad input: one line naming file and field

@pytest.mark.parametrize("sample, times, units, field, what", [
    (2, [0.1, 0.2, 0.3], [1, 700, 3], "spikes/units", r"unit 700 of spike 1 is outside \[0, 700\)"),
    (1, [0.1, 0.3, 0.2], [1, 2, 3], "spikes/times", r"times go backwards at spike 2 \(0.2\d* s after 0.3\d* s, 1 such\)"),
    (0, [0.1, float("nan")], [1, 2], "spikes/times", r"time nan of spike 1 is not a time in seconds"),
    (3, [-0.5, 0.1], [1, 2], "spikes/times", r"time -0.5 of spike 0 is not a time in seconds"),
])
def test_a_bad_sample_is_refused_naming_the_file_the_field_and_the_sample(tmp_path, sample, times, units, field, what):
    t, u, labels = spike_samples(4, 0)
    t[sample], u[sample] = np.asarray(times, np.float32), np.asarray(units, np.uint16)
    path = tmp_path / "shd_train.h5"
    write_spike_file(path, t, u, labels)
    with pytest.raises(SpikeFileError, match=rf"^{path}: {field}\[{sample}\]: {what}") as e:
        read_spike_sample(path, sample)
    assert "\n" not in str(e.value)


def test_a_label_out_of_range_is_refused_naming_the_file_and_the_field(tmp_path):
    t, u, _ = spike_samples(4, 0)
    write_spike_file(tmp_path / "shd_train.h5", t, u, [0, 20, 1, 25])
    with pytest.raises(SpikeFileError, match=r"shd_train.h5: labels: label 20 of sample 1 is outside \[0, 20\) "
                                             r"\(2 such\)$"):
        read_spike_labels(tmp_path / "shd_train.h5", 20)


def test_units_and_times_of_unequal_length_are_refused(tmp_path):
    times, units, labels = spike_samples(3, 0)
    units[1] = units[1][:-1]
    write_spike_file(tmp_path / "s.h5", times, units, labels)
    with pytest.raises(SpikeFileError, match=r"s.h5: spikes/units\[1\]: \d+ units for \d+ times$"):
        read_spike_sample(tmp_path / "s.h5", 1)


@pytest.mark.parametrize("field", ["spikes/times", "spikes/units", "labels"])
def test_a_missing_field_is_refused_naming_it(tmp_path, field):
    write_spike_file(tmp_path / "s.h5", *spike_samples(3, 0), skip=(field,))
    with pytest.raises(SpikeFileError, match=rf"s.h5: {field}: missing \(a spike file holds spikes/times, "):
        read_spike_labels(tmp_path / "s.h5", 20)


def test_fields_of_another_kind_or_length_are_refused(tmp_path):
    path = tmp_path / "s.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("spikes/times", data=np.zeros(3, np.float32))  # not one array per sample
        f.create_dataset("spikes/units", (3,), dtype=h5py.vlen_dtype(np.dtype("uint16")))
        f.create_dataset("labels", data=np.zeros(3, np.uint16))
    with pytest.raises(SpikeFileError, match=r"s.h5: spikes/times: holds float32, expected one variable-length"):
        read_spike_labels(path, 20)
    times, units, labels = spike_samples(3, 0)
    write_spike_file(path, times, units, labels[:2])
    with pytest.raises(SpikeFileError, match=r"s.h5: spikes/times: 3 samples, but labels has 2$"):
        read_spike_labels(path, 20)


@pytest.mark.parametrize("damage", ["gzipped", "truncated", "garbage", "empty"])
def test_a_damaged_file_is_refused_in_one_line(tmp_path, damage):
    path = tmp_path / "shd_train.h5"
    write_spike_file(path, *spike_samples(30, 0))
    data = path.read_bytes()
    path.write_bytes({"gzipped": gzip.compress(data), "truncated": data[:len(data) // 3],
                      "garbage": os.urandom(4096), "empty": b""}[damage])
    with pytest.raises(SpikeFileError) as e:
        read_spike_labels(path, 20)
        for i in range(30):
            read_spike_sample(path, i)
    assert str(e.value).startswith(f"{path}: ") and "\n" not in str(e.value)


def test_a_bad_sample_leaves_no_cache_behind(tmp_path):
    """The build stops at the bad sample naming file and field; no frames.npy or meta.json is written."""
    root = write_shd(tmp_path / "shd", train=10, test=2)
    times, units, labels = spike_samples(10, 0)
    units[7] = np.full(len(units[7]), 700, np.uint16)
    write_spike_file(root / "shd_train.h5", times, units, labels)
    with pytest.raises(RuntimeError, match=r"shd_train.h5: SpikeFileError: spikes/units\[7\]: unit 700"):
        load_event_frames("shd", root, T=4, train=True, cache_dir=tmp_path / "c", workers=0, progress=False)
    (folder,) = (tmp_path / "c").iterdir()
    assert not (folder / "meta.json").exists() and not (folder / "frames.npy").exists()


def test_a_missing_split_is_refused_naming_the_file(tmp_path):
    root = write_shd(tmp_path / "shd", train=4, test=2)
    (root / "shd_test.h5").unlink()
    with pytest.raises(FileNotFoundError, match=r"^shd: no 'shd_test.h5' found under any of: "):
        list_samples("shd", root, train=False)


def test_without_h5py_the_refusal_names_it(tmp_path, monkeypatch):
    import sys

    write_shd(tmp_path, train=2, test=2)
    monkeypatch.setitem(sys.modules, "h5py", None)
    with pytest.raises(ImportError, match=r"needs h5py: pip install 'plif\[audio\]' \(or pip install h5py\)$"):
        list_samples("shd", tmp_path, train=True)


def test_plif_data_info_on_a_spike_file_says_how_it_is_read(tmp_path, capsys):
    from plif.cli.main import main

    write_spike_file(tmp_path / "shd_test.h5", *spike_samples(2, 0))
    assert main(["data", "info", str(tmp_path / "shd_test.h5")]) == 2
    assert "an HDF5 file: SHD / SSC's spike files hold a whole split, read as a dataset (plif data prepare shd" in (
        capsys.readouterr().err)
