"""Processes asking for the same frame cache (the ranks of a torchrun job) share one build: the
others wait for the lock holder, then read what it built or fail with its message."""
import threading

import numpy as np
import pytest

from plif.data.events import cache
from plif.data.events.cache import CacheError, build_frames_cache, load_cached
from plif.data.events.datasets import EventSample


def _nmnist_bytes(x, y, p, t):
    return b"".join(bytes([a, b, (c << 7) | ((d >> 16) & 0x7F), (d >> 8) & 0xFF, d & 0xFF])
                    for a, b, c, d in zip(x, y, p, t))


@pytest.fixture
def samples(tmp_path):
    rng = np.random.default_rng(0)
    out = []
    for i in range(4):
        f = tmp_path / f"{i}.bin"
        n = 20
        f.write_bytes(_nmnist_bytes(rng.integers(0, 34, n), rng.integers(0, 34, n), rng.integers(0, 2, n),
                                    np.sort(rng.integers(0, 50_000, n))))
        out.append(EventSample(str(f), i % 2))
    return out


def _two_builders(samples, folder, monkeypatch, fail: bool):
    """Builder A holds the lock inside its first chunk until B is seen waiting; returns both outcomes,
    the chunks built and B's messages."""
    monkeypatch.setattr(cache, "WAIT_REPORT_S", 0.05)
    real, built, waiting = cache._build_chunk, [], threading.Event()

    def chunk(c, out, *a):
        assert waiting.wait(20), "B never waited"
        built.append(out)
        if fail:
            raise RuntimeError(f"{c[0].path}: ValueError: bad event\nsecond line")
        return real(c, out, *a)

    monkeypatch.setattr(cache, "_build_chunk", chunk)
    real_wait = cache._Lock._wait

    def wait(self):
        waiting.set()
        real_wait(self)

    monkeypatch.setattr(cache._Lock, "_wait", wait)
    results = {}

    def run(name):
        try:
            results[name] = build_frames_cache(samples, folder, 3, "count", (34, 34), workers=0, progress=False)
        except Exception as e:  # noqa: BLE001 - the outcome is what the test compares
            results[name] = e

    a = threading.Thread(target=run, args=("A",))
    a.start()
    while not (folder / ".build.lock").exists():
        pass
    b = threading.Thread(target=run, args=("B",))
    b.start()
    a.join(30)
    b.join(30)
    return results, built


def test_waiting_process_reads_the_finished_build(samples, tmp_path, monkeypatch, capfd):
    folder = tmp_path / "cache"
    results, built = _two_builders(samples, folder, monkeypatch, fail=False)
    assert results == {"A": folder, "B": folder}
    assert len(built) == 1  # one build (one chunk of 4 samples), not two
    assert "waiting for process" in capfd.readouterr().err
    frames, labels = load_cached(folder)
    assert frames.shape == (4, 3, 2, 34, 34) and labels.tolist() == [0, 1, 0, 1]


def test_failed_build_fails_every_waiting_process_with_its_message(samples, tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    results, built = _two_builders(samples, folder, monkeypatch, fail=True)
    assert len(built) == 1  # B did not build again
    # whichever thread took the lock first built (and failed); the other waited and got its message
    builder, waiter = (results["B"], results["A"]) if isinstance(results["A"], CacheError) else (results["A"], results["B"])
    assert isinstance(builder, RuntimeError) and isinstance(waiter, CacheError)
    assert str(waiter) == " ".join(str(builder).split()) and "\n" not in str(waiter) and "bad event" in str(waiter)
    # a later build (the data fixed) is not refused by the recorded failure
    monkeypatch.undo()
    assert build_frames_cache(samples, folder, 3, "count", (34, 34), workers=0, progress=False) == folder


def test_no_wait_refuses_naming_the_holder(samples, tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir()
    with cache._Lock(folder):
        with pytest.raises(CacheError, match=r"another process \(pid \d+\) is building"):
            build_frames_cache(samples, folder, 3, "count", (34, 34), workers=0, progress=False, wait=False)
