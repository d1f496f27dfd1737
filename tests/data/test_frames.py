"""events_to_frames against a direct per-event count, the SPEC §4 slice boundaries, edge cases."""
import numpy as np
import pytest

from plif.data.events import make_events, read_events
from plif.data.frames import events_to_frames, slice_index


def random_events(n, h=5, w=7, seed=0):
    rng = np.random.default_rng(seed)
    t = np.sort(rng.integers(0, 10_000, n))
    return make_events(t, rng.integers(0, w, n), rng.integers(0, h, n), rng.integers(0, 2, n))


def direct_count(ev, T, h, w, slices):
    out = np.zeros((T, 2, h, w), dtype=np.float32)
    for e, j in zip(ev, slices):
        out[j, e["p"], e["y"], e["x"]] += 1
    return out


def test_count_split_boundaries_follow_spec():
    ev = random_events(10)
    # N=10, T=3: floor(10/3)=3 -> [0,3) [3,6) [6,10)
    assert slice_index(ev, 3).tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 2]
    assert slice_index(ev, 10).tolist() == list(range(10))


@pytest.mark.parametrize("n,T", [(1000, 10), (997, 7), (50, 1), (30, 16)])
def test_count_frames_equal_direct_count(n, T):
    ev = random_events(n)
    per = n // T
    slices = [min(i // per, T - 1) for i in range(n)]
    fr = events_to_frames(ev, T, (5, 7))
    assert fr.dtype == np.float32 and fr.shape == (T, 2, 5, 7)
    np.testing.assert_array_equal(fr, direct_count(ev, T, 5, 7, slices))
    assert fr.sum() == n and fr[:-1].sum(axis=(1, 2, 3)).tolist() == [per] * (T - 1)


def test_time_split_equal_intervals():
    ev = make_events([100, 149, 150, 199, 200, 299, 300], [0] * 7, [0] * 7, [1, 0, 1, 0, 1, 0, 1])
    # span [100, 300] -> 201 us, T=2: j = (t-100)*2 // 201 -> boundary at t=200.5
    assert slice_index(ev, 2, "time").tolist() == [0, 0, 0, 0, 0, 1, 1]
    fr = events_to_frames(ev, 2, (1, 1), split="time")
    assert fr[:, :, 0, 0].tolist() == [[2, 3], [1, 1]]
    ev2 = random_events(500, seed=3)
    j = slice_index(ev2, 8, "time")
    assert j.min() == 0 and j.max() == 7 and np.all(np.diff(j) >= 0)
    np.testing.assert_array_equal(events_to_frames(ev2, 8, (5, 7), "time"), direct_count(ev2, 8, 5, 7, j))


def test_empty_and_fewer_events_than_slices():
    empty = make_events([], [], [], [])
    for split in ("count", "time"):
        fr = events_to_frames(empty, 4, (3, 3), split)
        assert fr.shape == (4, 2, 3, 3) and not fr.any()
    few = random_events(3, 3, 3)
    fr = events_to_frames(few, 5, (3, 3))
    assert fr.shape == (5, 2, 3, 3) and fr[:4].sum() == 0 and fr[4].sum() == 3  # all in the last slice


def test_bad_input():
    ev = random_events(20, h=5, w=7)
    with pytest.raises(ValueError, match=r"x=6, y=4 do not fit sensor \(H, W\) = \(4, 4\)"):
        events_to_frames(ev, 2, (4, 4))
    with pytest.raises(ValueError, match="unknown split 'rate'"):
        events_to_frames(ev, 2, (5, 7), split="rate")
    with pytest.raises(ValueError, match="T must be >= 1"):
        events_to_frames(ev, 0, (5, 7))
    bad = ev.copy()
    bad["p"][3] = -1
    with pytest.raises(ValueError, match="polarity"):
        events_to_frames(bad, 2, (5, 7))


def test_real_nmnist_frames(shared_data):
    ev = read_events(shared_data("nmnist") / "sample_nmnist.bin")
    T, n = 10, len(ev)
    fr = events_to_frames(ev, T, (34, 34))
    slices = [min(i // (n // T), T - 1) for i in range(n)]
    np.testing.assert_array_equal(fr, direct_count(ev, T, 34, 34, slices))
    assert fr[:, 1].sum() == ev["p"].sum() and fr[:, 0].sum() == n - ev["p"].sum()


def test_time_split_with_absolute_epoch_times():
    # AEDAT 4 times are microseconds since 1970 (~1.6e15): only differences may enter the products
    t0 = 1605537493718345
    ev = make_events(t0 + np.array([0, 10, 20, 29]), [0, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1])
    assert slice_index(ev, 3, "time").tolist() == [0, 1, 2, 2]
