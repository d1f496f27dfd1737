"""The paper's frames as a Tonic-compatible transform on structured (x, y, t, p) arrays."""
import numpy as np
import pytest

from plif.data.events import read_events
from plif.data.frames import events_to_frames
from plif.data.tonic_frames import ToPaperFrames

TONIC_DTYPE = np.dtype([("x", "<i8"), ("y", "<i8"), ("t", "<i8"), ("p", "<i8")])  # tonic.io.make_structured_array


def as_tonic(ev, dtype=TONIC_DTYPE):
    out = np.empty(len(ev), dtype=dtype)
    for f in ("x", "y", "t", "p"):
        out[f] = ev[f]
    return out


def test_hand_written_events():
    ev = np.array([(1, 2, 10, 1), (1, 2, 20, 0), (3, 0, 30, 1)], dtype=TONIC_DTYPE)
    f = ToPaperFrames((4, 3, 2), 2)(ev)  # Tonic order (W, H, P): 4 wide, 3 high
    assert f.shape == (2, 2, 3, 4) and f.dtype == np.float32
    assert f[0, 1, 2, 1] == 1 and f[1, 0, 2, 1] == 1 and f[1, 1, 0, 3] == 1 and f.sum() == 3
    signed = ev.copy()
    signed["p"] = [1, -1, 1]
    assert np.array_equal(ToPaperFrames((4, 3, 2), 2)(signed), f)
    with pytest.raises(ValueError, match="P = 2"):
        ToPaperFrames((4, 3, 1), 2)
    with pytest.raises(ValueError, match="missing \\['p'\\]"):
        ToPaperFrames((4, 3, 2), 2)(np.zeros(2, dtype=[("x", "i8"), ("y", "i8"), ("t", "i8")]))


def test_real_recording_equals_plif_frames(shared_data):
    ev = read_events(shared_data("nmnist") / "sample_nmnist.bin")
    for split in ("count", "time"):
        np.testing.assert_array_equal(ToPaperFrames((34, 34, 2), 10, split)(as_tonic(ev)),
                                      events_to_frames(ev, 10, (34, 34), split))


def test_agrees_with_tonic_to_frame(shared_data):
    tonic = pytest.importorskip("tonic")
    ev = read_events(shared_data("nmnist") / "sample_nmnist.bin")
    sensor = tonic.datasets.NMNIST.sensor_size
    assert tuple(sensor) == (34, 34, 2)
    T = 7
    assert len(ev) % T == 6
    nmnist_dtype = np.dtype(tonic.datasets.NMNIST.dtype)  # Tonic's own dtype
    whole = as_tonic(ev[:len(ev) - len(ev) % T], nmnist_dtype)
    theirs = tonic.transforms.ToFrame(sensor_size=sensor, n_event_bins=T)(whole)
    ours = ToPaperFrames(sensor, T)(whole)
    np.testing.assert_array_equal(ours, theirs)  # N a multiple of T: the same frames
    tail = as_tonic(ev, nmnist_dtype)
    diff = ToPaperFrames(sensor, T)(tail) - tonic.transforms.ToFrame(sensor_size=sensor, n_event_bins=T)(tail)
    assert diff[:-1].sum() == 0 and diff[-1].sum() == len(ev) % T  # Tonic drops the remainder
