"""ASL-DVS (.mat recordings, scipy.io writing them here) and DVS-Lip (structured .npy arrays) in their
published layouts: one catalog record and one reader each, frames as every event dataset's."""
import numpy as np
import pytest

from plif.catalog import ASL_DVS_CLASSES, DATASETS, DVS_LIP_CLASSES
from plif.data.events import EventFormatError, detect_format, read_events
from plif.data.events.datasets import list_samples
from plif.data.events.load import load_event_frames
from plif.data.frames import events_to_frames

LIP_DTYPE = np.dtype([("t", "<i4"), ("x", "i1"), ("y", "i1"), ("p", "i1")])  # as DVS-Lip's files hold them


def _events(seed, n, w, h):
    rng = np.random.default_rng(seed)
    return (np.sort(rng.integers(0, 10**6, n)), rng.integers(0, w, n), rng.integers(0, h, n), rng.integers(0, 2, n))


def _write_mat(path, t, x, y, p, **extra):
    from scipy.io import savemat

    fields = {"x": np.asarray(x, float).reshape(-1, 1), "y": np.asarray(y, float).reshape(-1, 1),
              "ts": np.asarray(t, float).reshape(-1, 1), "pol": np.asarray(p, float).reshape(-1, 1)}
    savemat(str(path), {**fields, **extra})


def _write_lip(path, t, x, y, p):
    a = np.empty(len(t), LIP_DTYPE)
    a["t"], a["x"], a["y"], a["p"] = t, x, y, p
    np.save(path, a)


@pytest.fixture
def asl_root(tmp_path):
    pytest.importorskip("scipy")
    root = tmp_path / "asl"
    for c in ASL_DVS_CLASSES:
        (root / c).mkdir(parents=True)
        for i in range(1, 6):  # 5 a letter: 4 train, 1 test at 0.8
            _write_mat(root / c / f"{c}_{i:04d}.mat", *_events(i, 30, 240, 180))
    return root


def test_asl_dvs_reads_the_matlab_fields_as_stored_and_splits_by_file_number(asl_root):
    t, x, y, p = _events(3, 30, 240, 180)
    ev = read_events(asl_root / "k" / "k_0003.mat")
    assert detect_format(asl_root / "k" / "k_0003.mat") == "mat"
    assert ev["t"].tolist() == t.tolist() and ev["x"].tolist() == x.tolist() and ev["y"].tolist() == y.tolist()
    assert ev["p"].tolist() == p.tolist()  # no flip: SpikingJelly rotates by 180 degrees, Tonic flips y
    train, test = (list_samples("asl-dvs", asl_root, train=s) for s in (True, False))
    assert len(train) == 96 and len(test) == 24 and DATASETS["asl-dvs"].num_classes == 24 == len(set(s.label for s in test))
    assert test[0].path.endswith("a_0005.mat") and "j" not in ASL_DVS_CLASSES


def test_asl_dvs_frames_are_the_events_integrated(asl_root, tmp_path):
    frames, labels = load_event_frames("asl-dvs", asl_root, T=3, train=False, cache_dir=tmp_path / "c", workers=0,
                                       progress=False)
    assert tuple(frames.shape) == (24, 3, 2, 180, 240) and labels.tolist() == list(range(24))
    want = events_to_frames(read_events(asl_root / "c" / "c_0005.mat"), 3, (180, 240))
    assert np.array_equal(frames[2].numpy(), want)


@pytest.mark.parametrize("fields, said", [
    (dict(drop="pol"), "field 'pol' missing"),
    (dict(pol=[0, 2, 1]), "field 'pol' holds 2, outside \\[0, 1\\]"),
    (dict(x=[1.5, 2, 3]), "field 'x' holds values that are not whole numbers"),
    (dict(ts=[1, 2]), "fields of unequal length"),
    (dict(x=[-1, 2, 3]), "field 'x' holds -1"),
])
def test_a_bad_asl_dvs_recording_is_refused_naming_the_file_and_the_field(tmp_path, fields, said):
    pytest.importorskip("scipy")
    from scipy.io import savemat

    m = {"x": [1, 2, 3], "y": [4, 5, 6], "ts": [10, 20, 30], "pol": [0, 1, 1]}
    m.update({k: v for k, v in fields.items() if k != "drop"})
    m.pop(fields.get("drop", ""), None)
    savemat(str(tmp_path / "a_0001.mat"), {k: np.asarray(v, float).reshape(-1, 1) for k, v in m.items()})
    with pytest.raises(EventFormatError, match=rf"a_0001.mat: byte offset 0: {said}"):
        read_events(tmp_path / "a_0001.mat")


def test_a_damaged_mat_file_is_refused_in_one_line(tmp_path):
    pytest.importorskip("scipy")
    _write_mat(tmp_path / "a_0001.mat", *_events(0, 500, 240, 180))
    data = (tmp_path / "a_0001.mat").read_bytes()
    (tmp_path / "a_0001.mat").write_bytes(data[:len(data) // 2])
    with pytest.raises(EventFormatError) as e:
        read_events(tmp_path / "a_0001.mat")
    assert "a_0001.mat" in str(e.value) and "\n" not in str(e.value)


def test_asl_dvs_events_outside_the_sensor_are_refused(asl_root, tmp_path):
    _write_mat(asl_root / "b" / "b_0005.mat", [1, 2], [3, 240], [4, 5], [0, 1])
    with pytest.raises(RuntimeError, match=r"b_0005.mat: ValueError: event coordinates up to x=240"):
        load_event_frames("asl-dvs", asl_root, T=2, train=False, cache_dir=tmp_path / "c", workers=0, progress=False)


def test_without_scipy_the_refusal_names_it(asl_root, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "scipy.io", None)
    with pytest.raises(ImportError, match=r"needs scipy: pip install 'plif\[mat\]' \(or pip install scipy\)$"):
        read_events(asl_root / "a" / "a_0001.mat")


@pytest.fixture
def lip_root(tmp_path):
    root = tmp_path / "DVS-Lip"
    for split, n in (("train", 2), ("test", 1)):
        for k, word in enumerate(DVS_LIP_CLASSES):
            (root / split / word).mkdir(parents=True)
            for i in range(n):
                _write_lip(root / split / word / f"{i}.npy", *_events(k * 10 + i + 5 * (split == "test"), 20, 128, 128))
    return tmp_path


def test_dvs_lip_reads_its_train_and_test_folders(lip_root, tmp_path):
    train, test = (list_samples("dvs-lip", lip_root, train=s) for s in (True, False))
    assert len(train) == 200 and len(test) == 100 and [s.label for s in test] == list(range(100))
    assert detect_format(test[7].path) == "npy"
    frames, labels = load_event_frames("dvs-lip", lip_root, T=2, train=False, cache_dir=tmp_path / "c", workers=0,
                                       progress=False)
    assert tuple(frames.shape) == (100, 2, 2, 128, 128)
    t, x, y, p = _events(7 * 10 + 5, 20, 128, 128)
    want = np.zeros((2, 2, 128, 128))
    for i in range(20):  # by count: 10 events a frame
        want[i // 10, p[i], y[i], x[i]] += 1
    assert np.array_equal(frames[7].numpy(), want)


@pytest.mark.parametrize("array, said", [
    (np.zeros(3, [("t", "<i4"), ("x", "i1"), ("y", "i1")]), "field 'p' missing"),
    (np.zeros((2, 3), LIP_DTYPE), "expected a 1-d structured array"),
    (np.zeros(3, [("t", "<f8"), ("x", "i1"), ("y", "i1"), ("p", "i1")]), "field 't' holds float64, expected integers"),
    (np.array([(1, -3, 2, 1)], LIP_DTYPE), "field 'x' holds -3, not a pixel coordinate"),
    (np.array([(1, 3, 2, 2)], LIP_DTYPE), r"field 'p' holds values in \[2, 2\], expected 0 or 1"),
    (np.arange(5), "expected a 1-d structured array"),
])
def test_a_bad_dvs_lip_recording_is_refused_naming_the_file_and_the_field(tmp_path, array, said):
    np.save(tmp_path / "0.npy", array)
    with pytest.raises(EventFormatError, match=rf"0.npy: byte offset 0: .*{said}"):
        read_events(tmp_path / "0.npy")


def test_a_pickled_or_truncated_npy_is_refused(tmp_path):
    np.save(tmp_path / "0.npy", np.array([{"t": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(EventFormatError, match=r"0.npy: byte offset 0: not a readable .npy array"):
        read_events(tmp_path / "0.npy")
    _write_lip(tmp_path / "1.npy", *_events(0, 400, 128, 128))
    (tmp_path / "1.npy").write_bytes((tmp_path / "1.npy").read_bytes()[:1000])
    with pytest.raises(EventFormatError, match=r"1.npy: byte offset 0: not a readable .npy array"):
        read_events(tmp_path / "1.npy")
