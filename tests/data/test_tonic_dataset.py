"""Any Tonic dataset through plif's exact frames and cache (issue 57.3): a Tonic-style N-MNIST over the
real sample recording gives the frames of plif's own N-MNIST reader and pipeline; events taken as they
come, no Tonic transform applied, each convention that differs said in one line; a cache that is
never stale.  Tonic itself is not needed (its import pulls h5py, scipy and librosa): a stand-in with
Tonic's dataset interface and structured arrays, and the real Tonic where it is installed."""
import shutil
from pathlib import Path

import numpy as np
import pytest

from plif.data.events import read_nmnist_bin
from plif.data.events.load import load_event_frames
from plif.data.frames import events_to_frames
from plif.data.tonic_dataset import TonicFrames


def tonic_read_mnist_file(path, dtype):
    """Tonic's ``tonic.io.read_mnist_file`` (1.7), written again here: 5 bytes per event, y = 240 an overflow."""
    raw = np.fromfile(path, dtype=np.uint8).astype(np.uint32)
    all_y, all_x = raw[1::5], raw[0::5]
    all_p = (raw[2::5] & 128) >> 7
    all_ts = ((raw[2::5] & 127) << 16) | (raw[3::5] << 8) | raw[4::5]
    for i in np.where(all_y == 240)[0]:
        all_ts[i:] += 2**13
    keep = np.where(all_y != 240)[0]
    out = np.zeros(len(keep), dtype=dtype)
    out["x"], out["y"], out["t"], out["p"] = all_x[keep], all_y[keep], all_ts[keep], all_p[keep]
    return out


class NMNIST:
    """Tonic's ``tonic.datasets.NMNIST`` interface without Tonic: files in ``data``, labels in
    ``targets``, events as Tonic's structured ``(x, y, t, p)`` array, Tonic's ``(W, H, P)`` sensor."""

    sensor_size = (34, 34, 2)
    dtype = np.dtype([("x", int), ("y", int), ("t", int), ("p", int)])
    ordering = dtype.names

    def __init__(self, files, targets, transform=None, target_transform=None, transforms=None, polarity=None):
        self.data, self.targets = [str(f) for f in files], list(targets)
        self.transform, self.target_transform, self.transforms = transform, target_transform, transforms
        self.polarity, self.reads = polarity, 0

    def __getitem__(self, index):
        self.reads += 1
        events = tonic_read_mnist_file(self.data[index], self.dtype)
        if self.polarity == "signed":
            events["p"] = 2 * events["p"] - 1
        return events, self.targets[index]

    def __len__(self):
        return len(self.data)


def _plif_frames(path, T, split):
    return events_to_frames(read_nmnist_bin(path), T, (34, 34), split)


@pytest.mark.parametrize("split", ["count", "time"])
@pytest.mark.parametrize("T", [1, 10, 16])
def test_tonic_nmnist_on_the_real_sample_gives_plifs_own_frames(T, split, shared_data, tmp_path):
    sample = shared_data("nmnist") / "sample_nmnist.bin"
    ds = NMNIST([sample], [3])
    lines = []
    frames = TonicFrames(ds, T, split, cache_dir=tmp_path / "cache", log=lines.append)
    got, label = frames[0]
    assert got.dtype == np.float32 and got.shape == (T, 2, 34, 34) and label == 3
    assert np.array_equal(got, _plif_frames(sample, T, split)) and got.sum() > 1000
    assert lines == []  # N-MNIST: Tonic's conventions are plif's


def test_and_plifs_whole_nmnist_pipeline(shared_data, tmp_path, monkeypatch):
    """The same recording as plif's N-MNIST dataset (Train/<digit>/*.bin, listed and cached by plif) and as
    Tonic's (its files walked in sorted order, as tonic.datasets.NMNIST does): the same frames and labels."""
    sample = shared_data("nmnist") / "sample_nmnist.bin"
    files = [tmp_path / "nm" / "Train" / str(digit) / "00001.bin" for digit in range(10)]
    for f in files:
        f.parent.mkdir(parents=True)
        shutil.copy(sample, f)
    monkeypatch.setenv("PLIF_DATA_ROOT", str(tmp_path / "root"))
    ours, labels = load_event_frames("nmnist", tmp_path / "nm", 10, train=True, workers=0, progress=False)
    tonic = TonicFrames(NMNIST(files, range(10)), 10, log=lambda line: None)
    assert np.array_equal(np.asarray(tonic.frames), np.asarray(ours))
    assert list(tonic.labels) == list(labels) == list(range(10))


def _recordings(tmp_path, n=3, seed=0):
    from plif_testing import atis_bin

    rng = np.random.default_rng(seed)
    files = []
    for k in range(n):
        m = int(rng.integers(5, 60))
        ev = rng.integers(0, 34, m), rng.integers(0, 34, m), rng.integers(0, 2, m), np.sort(rng.integers(0, 10**5, m))
        f = tmp_path / "rec" / f"{k}.bin"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(atis_bin(zip(*ev)))
        files.append(f)
    return files


def test_the_cache_is_reused_and_never_stale(tmp_path):
    files = _recordings(tmp_path)
    ds = NMNIST(files, [0, 1, 2])
    first = TonicFrames(ds, 4, cache_dir=tmp_path / "c", log=lambda line: None)
    assert ds.reads == 3
    again = TonicFrames(ds, 4, cache_dir=tmp_path / "c", log=lambda line: None)
    assert ds.reads == 3 and np.array_equal(np.asarray(again.frames), np.asarray(first.frames))  # read from the cache
    files[1].write_bytes(files[0].read_bytes())  # an edited recording rebuilds it
    edited = TonicFrames(ds, 4, cache_dir=tmp_path / "c", log=lambda line: None)
    assert ds.reads == 6 and np.array_equal(edited[1][0], _plif_frames(files[0], 4, "count"))
    other_T = TonicFrames(ds, 5, cache_dir=tmp_path / "c", log=lambda line: None)
    assert other_T[0][0].shape == (5, 2, 34, 34)
    from plif.data.events.clean import cache_like_folders

    assert cache_like_folders(tmp_path / "c") == []  # apart from the caches plif data verify and clean read
    assert len(list((tmp_path / "c" / "tonic").glob("*/meta.json"))) == 2


def test_tonic_transforms_are_refused_not_applied(tmp_path):
    files = _recordings(tmp_path, 1)
    for kw in ({"transform": lambda ev: ev}, {"target_transform": int}, {"transforms": lambda e, t: (e, t)}):
        with pytest.raises(ValueError, match=rf"NMNIST was built with {next(iter(kw))}=...: plif integrates Tonic's "
                                             "raw events itself and applies no Tonic transform"):
            TonicFrames(NMNIST(files, [0], **kw), 4, cache_dir=tmp_path / "c")


def test_each_convention_that_differs_is_said_in_one_line(tmp_path):
    files = _recordings(tmp_path, 2)
    lines = []
    signed = TonicFrames(NMNIST(files, [0, 1], polarity="signed"), 4, cache_dir=tmp_path / "c", log=lines.append)
    assert lines == ["NMNIST: polarity p is -1/1 in Tonic's events, taken as plif's OFF 0 / ON 1"]
    assert np.array_equal(signed[1][0], _plif_frames(files[1], 4, "count"))

    class CIFAR10DVS(NMNIST):
        sensor_size = (128, 128, 2)

    class Wide(NMNIST):
        sensor_size = (40, 34, 2)  # Tonic's (W, H, P)

    lines = []
    TonicFrames(CIFAR10DVS(files, [0, 1]), 2, cache_dir=tmp_path / "c", log=lines.append)
    assert lines == ["CIFAR10DVS: plif's own cifar10-dvs reader flips x (flip_x); Tonic's events are taken as they "
                     "come, so these frames are the mirror image of plif's cifar10-dvs frames"]
    lines = []
    wide = TonicFrames(Wide(files, [0, 1]), 2, cache_dir=tmp_path / "c", log=lines.append)
    assert wide[0][0].shape == (2, 2, 34, 40)
    assert lines == ["Wide: Tonic's sensor_size (40, 34, 2) is (W, H, P); plif's frames are [T, 2, H, W] with "
                     "(H, W) = (34, 40)"]


def test_bad_input_is_refused_in_one_line(tmp_path):
    files = _recordings(tmp_path, 1)

    class NoSensor(NMNIST):
        sensor_size = None

    with pytest.raises(ValueError, match=r"NoSensor has no sensor_size .* pass sensor_size=\(H, W\)"):
        TonicFrames(NoSensor(files, [0]), 4, cache_dir=tmp_path / "c")
    assert TonicFrames(NoSensor(files, [0]), 4, sensor_size=(34, 34), cache_dir=tmp_path / "c",
                       log=lambda line: None)[0][0].shape == (4, 2, 34, 34)
    with pytest.raises(ValueError, match=r"NMNIST\[0\]: target \(0, 1\): a class index"):
        TonicFrames(NMNIST(files, [(0, 1)]), 4, cache_dir=tmp_path / "c")
    with pytest.raises(ValueError, match=r"NMNIST\[0\]: event coordinates up to .* do not fit sensor \(H, W\) = "
                                         r"\(8, 8\) \(sensor_size=\(H, W\) gives another\)"):
        TonicFrames(NMNIST(files, [0]), 4, sensor_size=(8, 8), cache_dir=tmp_path / "c")
    with pytest.raises(ValueError, match="T: frames per sample, an integer >= 1, got 0"):
        TonicFrames(NMNIST(files, [0]), 0)
    with pytest.raises(TypeError, match="dataset: a Tonic dataset"):
        TonicFrames(3, 4)
    assert len(list((tmp_path / "c").glob("tonic/*/meta.json"))) == 1  # the one accepted; the refused ones wrote none


def test_the_real_tonic_nmnist_gives_plifs_frames(shared_data, tmp_path):
    tonic = pytest.importorskip("tonic")
    sample = shared_data("nmnist") / "sample_nmnist.bin"
    ds = tonic.datasets.NMNIST.__new__(tonic.datasets.NMNIST)  # no download: the sample recording as its one file
    ds.data, ds.targets, ds.transform, ds.target_transform, ds.transforms = [str(sample)], [3], None, None, None
    ds.first_saccade_only = ds.stabilize = False
    frames = TonicFrames(ds, 10, cache_dir=tmp_path / "c", log=lambda line: None)
    assert np.array_equal(frames[0][0], _plif_frames(sample, 10, "count"))


def test_a_dataset_without_files_is_cached_on_its_events(tmp_path):
    """No ``data`` list of files: the key is the events' bytes (read once per load), the integration is saved."""
    from plif.data.events import make_events

    class InMemory:
        sensor_size = (34, 34, 2)

        def __init__(self, events):
            self.events, self.reads = events, 0

        def __getitem__(self, i):
            self.reads += 1
            return self.events[i], i

        def __len__(self):
            return len(self.events)

    dtype = np.dtype([("x", "<i8"), ("y", "<i8"), ("t", "<i8"), ("p", "<i8")])
    events = [np.array([(1, 2, 10, 1), (3, 4, 20, 0)], dtype=dtype), np.array([(5, 6, 5, 1)], dtype=dtype)]
    ds = InMemory(events)
    first = TonicFrames(ds, 2, cache_dir=tmp_path / "c", log=lambda line: None)
    assert ds.reads == 4  # hashed, then integrated
    assert np.array_equal(first[0][0], events_to_frames(make_events([10, 20], [1, 3], [2, 4], [1, 0]), 2, (34, 34)))
    TonicFrames(ds, 2, cache_dir=tmp_path / "c", log=lambda line: None)
    assert ds.reads == 6  # hashed only: the frames come from the cache
    events[1]["x"] = 7  # other events: another cache
    changed = TonicFrames(ds, 2, cache_dir=tmp_path / "c", log=lambda line: None)
    assert ds.reads == 10 and changed[1][0][1, 1, 6, 7] == 1
