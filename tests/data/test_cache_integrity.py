"""The frame cache is never stale and never trusted blindly: edits of recordings, damaged cache
files, leftovers of killed builds, full disks and orphaned workers (issue #12)."""
import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from plif.cli.main import main
from plif.catalog import get_dataset
from plif.data.events import cache
from plif.data.events.cache import CacheError, build_frames_cache, check_cache, load_cached
from plif.data.events.datasets import list_samples

from plif_testing import watch_chunk_builds


def nmnist_bytes(n, seed):
    rng = np.random.default_rng(seed)
    t = np.sort(rng.integers(0, 50_000, n))
    return b"".join(bytes([int(rng.integers(34)), int(rng.integers(34)), (int(rng.integers(2)) << 7) | (int(v) >> 16),
                           (int(v) >> 8) & 0xFF, int(v) & 0xFF]) for v in t)


@pytest.fixture
def root(tmp_path):
    for d in range(10):
        for k in range(2):
            f = tmp_path / "nm" / "Train" / str(d) / f"{k}.bin"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(nmnist_bytes(20, d * 10 + k))
    return tmp_path / "nm"


def build(root, folder, **kw):
    samples = list_samples(get_dataset("nmnist"), root, True)
    return build_frames_cache(samples, folder, 3, "count", (34, 34), workers=kw.pop("workers", 0), chunk_size=4,
                              progress=False, **kw)


def counting(monkeypatch):
    return watch_chunk_builds(monkeypatch)


def test_same_size_edit_of_a_recording_rebuilds(root, tmp_path, monkeypatch, capsys):
    folder = build(root, tmp_path / "c")
    before = load_cached(folder)[0].copy()
    f = root / "Train" / "4" / "1.bin"
    raw = bytearray(f.read_bytes())
    raw[0] = (raw[0] + 1) % 34  # same size, one event moved
    f.write_bytes(bytes(raw))
    calls = counting(monkeypatch)
    build(root, tmp_path / "c")
    assert calls and "4/1.bin: recording changed" in capsys.readouterr().err
    after = load_cached(folder)[0]
    assert not np.array_equal(before[9], after[9]) and np.array_equal(before[8], after[8])


def test_touch_with_same_bytes_reuses_and_remembers(root, tmp_path, monkeypatch):
    folder = build(root, tmp_path / "c")
    f = root / "Train" / "2" / "0.bin"
    os.utime(f, ns=(time.time_ns(), time.time_ns() + 10**9))
    calls = counting(monkeypatch)
    build(root, tmp_path / "c")
    assert calls == []
    meta = check_cache(folder)
    assert meta["sources"][str(f)]["stat"][1] == f.stat().st_mtime_ns  # the hash is not redone next time


@pytest.mark.parametrize("damage", ["zero_labels", "garble_frames", "wrong_T", "truncate"])
def test_damaged_cache_files_are_named_and_rebuilt(root, tmp_path, damage, capsys):
    folder = build(root, tmp_path / "c")
    good_frames, good_labels = (a.copy() for a in load_cached(folder))
    frames, labels = folder / "frames.npy", folder / "labels.npy"
    if damage == "zero_labels":
        np.save(labels, np.zeros(20, dtype=np.int64))  # same size, valid npy: training would see 100 %
        name = "labels.npy: checksum mismatch"
    elif damage == "garble_frames":
        raw = bytearray(frames.read_bytes())
        raw[len(raw) // 2:len(raw) // 2 + 64] = b"\xff" * 64
        frames.write_bytes(bytes(raw))
        name = "frames.npy: checksum mismatch"
    elif damage == "wrong_T":
        np.save(frames, np.zeros((20, 4, 2, 34, 34), dtype=np.uint8))
        name = "frames.npy: "
    else:
        frames.write_bytes(frames.read_bytes()[:1000])
        name = "frames.npy: 1000 bytes"
    with pytest.raises(CacheError, match=f"{folder}/{name}.*rebuild"):
        load_cached(folder)
    build(root, tmp_path / "c")
    assert name in capsys.readouterr().err
    f2, l2 = load_cached(folder)
    assert np.array_equal(f2, good_frames) and np.array_equal(l2, good_labels)


def test_garbled_chunk_of_a_killed_build_is_redone(root, tmp_path, monkeypatch):
    n = watch_chunk_builds(monkeypatch, kill_after=3)
    with pytest.raises(KeyboardInterrupt):
        build(root, tmp_path / "c")
    chunk = Path(n[1])
    raw = bytearray(chunk.read_bytes())
    raw[-10:] = b"\x07" * 10
    chunk.write_bytes(bytes(raw))
    (tmp_path / "c" / ".frames.npy.999999.tmp").write_bytes(b"x" * 1000)  # left by a killed join
    (tmp_path / "c" / "chunks" / ".chunk_000004.npy.abcd.tmp").write_bytes(b"x")
    monkeypatch.undo()
    calls = counting(monkeypatch)
    folder = build(root, tmp_path / "c")
    assert sorted(Path(c).name for c in calls) == ["chunk_000001.npy", "chunk_000003.npy", "chunk_000004.npy"]
    assert not list(folder.glob(".*.tmp"))
    full = build(root, tmp_path / "full")
    assert np.array_equal(load_cached(folder)[0], load_cached(full)[0])


def test_full_disk_before_the_join_is_a_clean_error(root, tmp_path, monkeypatch):
    class Usage:
        total, used, free = 10**9, 10**9, 1000

    monkeypatch.setattr(cache.shutil, "disk_usage", lambda p: Usage)
    with pytest.raises(CacheError, match=r"frames.npy: joining the chunks needs 16.1 MiB of free space \([\d.]+ KiB "
                                         r"for the file and a 16.0 MiB margin\), 1000 bytes are free"):
        build(root, tmp_path / "c")
    Usage.free = 10 << 20  # room for the file, not for the margin: the message says what is really needed
    with pytest.raises(CacheError, match=r"needs 16.1 MiB of free space \(.*\), 10.0 MiB are free"):
        build(root, tmp_path / "c")
    folder = tmp_path / "c"
    assert not list(folder.glob(".*.tmp")) and not (folder / "frames.npy").exists()
    assert len(list((folder / "chunks").glob("chunk_*.npy"))) == 5  # kept for the resume
    monkeypatch.undo()

    def enospc(fd, off, n):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(cache.os, "posix_fallocate", enospc)
    with pytest.raises(CacheError, match="cannot reserve .* No space left on device"):
        build(root, folder)
    assert not list(folder.glob(".*.tmp")) and not (folder / "meta.json").exists()
    monkeypatch.undo()
    load_cached(build(root, folder))


def test_workers_end_with_their_parent(tmp_path):
    code = ("import os, sys, time, concurrent.futures as cf\n"
            "from plif.data.events.cache import _watch_parent\n"
            "pool = cf.ProcessPoolExecutor(1, initializer=_watch_parent, initargs=(os.getpid(),))\n"
            "print(pool.submit(os.getpid).result(), flush=True)\n"
            "pool.submit(time.sleep, 60)\n"
            "time.sleep(60)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    try:
        worker = int(parent.stdout.readline())
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        for _ in range(50):
            try:
                os.kill(worker, 0)
            except ProcessLookupError:
                break
            with open(f"/proc/{worker}/stat") as f:
                if f.read().split(") ")[1].startswith("Z"):
                    break  # exited, not yet reaped by init
            time.sleep(0.1)
        else:
            os.kill(worker, signal.SIGKILL)
            pytest.fail("the worker outlived its killed parent")
    finally:
        if parent.poll() is None:
            parent.kill()


def test_plif_data_verify(root, tmp_path, capsys):
    folder = build(root, tmp_path / "c")
    assert main(["data", "verify", str(folder)]) == 0
    assert "ok" in capsys.readouterr().out
    frames = folder / "frames.npy"
    st = frames.stat()
    raw = bytearray(frames.read_bytes())
    raw[-1] ^= 0x01  # bit rot: same size, and the old mtime put back
    frames.write_bytes(bytes(raw))
    os.utime(frames, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert main(["data", "verify", "--cache-dir", str(tmp_path)]) == 1
    assert "frames.npy: checksum mismatch" in capsys.readouterr().err
    frames.write_bytes(bytes(raw[:-1]) + bytes([raw[-1] ^ 0x01]))
    (root / "Train" / "0" / "0.bin").unlink()
    assert main(["data", "verify", str(folder)]) == 1
    assert "0/0.bin: recording changed or missing" in capsys.readouterr().err
    assert main(["data", "verify", str(folder), "--no-sources"]) == 0


def test_real_recordings_and_damaged_copies(shared_data, tmp_path):
    from plif.data.events import read_events
    from plif.data.frames import events_to_frames

    real = (shared_data("nmnist") / "sample_nmnist.bin").read_bytes()
    root = tmp_path / "nm"
    for d in range(10):
        (root / "Train" / str(d)).mkdir(parents=True)
        (root / "Train" / str(d) / "0.bin").write_bytes(real)
    folder = build(root, tmp_path / "c")
    frames, _ = load_cached(folder)
    want = events_to_frames(read_events(shared_data("nmnist") / "sample_nmnist.bin"), 3, (34, 34))
    assert np.array_equal(frames[0], want) and np.array_equal(frames[9], want)
    bad = root / "Train" / "6" / "0.bin"
    bad.write_bytes(real[:5 * 1000 + 3])  # cut inside event 1000
    with pytest.raises(RuntimeError, match=rf"{bad}: EventFormatError: byte offset 5000: truncated event"):
        build(root, tmp_path / "c")
    bad.write_bytes(b"\xff" * 10 + real[10:])  # same size, garbage first events: refused, not decoded
    with pytest.raises(RuntimeError, match=r"byte offset 0: not a recognised event file"):
        build(root, tmp_path / "c")


def _edit_in_place(f, at: int):
    """Change the event at byte ``at`` of ``f`` keeping its size and inode, then put the old mtime back."""
    st = f.stat()
    raw = bytearray(f.read_bytes())
    raw[at] = (raw[at] + 1) % 34
    with open(f, "r+b") as out:
        out.write(bytes(raw))
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert [st.st_size, st.st_mtime_ns, st.st_ino] == [f.stat().st_size, f.stat().st_mtime_ns, f.stat().st_ino]


def test_an_edit_that_keeps_size_mtime_inode_is_seen_on_load_and_rebuilds(root, tmp_path, monkeypatch, capsys):
    """A recording of at most 128 KiB is hashed whole on every load (its edges are all of it): the
    stale cache is rebuilt, saying which recording changed, not reused silently."""
    folder = build(root, tmp_path / "c")
    f = root / "Train" / "3" / "1.bin"
    _edit_in_place(f, 50)
    with pytest.raises(CacheError, match=r"3/1.bin: recording changed or missing"):
        check_cache(folder, sources=True)
    calls = counting(monkeypatch)
    build(root, tmp_path / "c")
    assert calls and f"rebuilding the frame cache: {f}: recording changed" in capsys.readouterr().err
    check_cache(folder, sources=True)


def test_an_edit_past_the_edges_of_a_large_recording_is_found_by_the_full_hash(root, tmp_path, monkeypatch, capsys):
    """Past the first and last 64 KiB only the whole hash sees it: plif data verify, and every
    prepare (hash_sources), which rebuilds."""
    f = root / "Train" / "3" / "1.bin"
    f.write_bytes(nmnist_bytes(40_000, 7))  # 200 kB
    folder = build(root, tmp_path / "c")
    _edit_in_place(f, 100_000 - 100_000 % 5)  # an event's x, in the middle
    check_cache(folder, sources=True)  # the load's check cannot see it (docs/data.md says so)
    assert main(["data", "verify", str(folder)]) == 1
    assert "3/1.bin: recording changed or missing" in capsys.readouterr().err
    calls = counting(monkeypatch)
    build(root, tmp_path / "c", hash_sources=True)
    assert calls and f"rebuilding the frame cache: {f}: recording changed" in capsys.readouterr().err


def test_a_cache_without_edges_hashes_once_and_records_them(root, tmp_path, monkeypatch):
    """A cache built before the edges were recorded is reused after one whole hash of every recording."""
    import json

    folder = build(root, tmp_path / "c")
    meta = json.loads((folder / "meta.json").read_text())
    for fp in meta["sources"].values():
        del fp["edges"]
    (folder / "meta.json").write_text(json.dumps(meta))
    calls = counting(monkeypatch)
    build(root, tmp_path / "c")
    assert calls == [] and all("edges" in fp for fp in check_cache(folder)["sources"].values())


@pytest.mark.parametrize("edit,said", [
    (lambda m: m.pop("T"), "key 'T' is missing"),
    (lambda m: m.pop("sources"), "key 'sources' is missing"),
    (lambda m: m["files"]["frames.npy"].pop("checksum"), "files['frames.npy']: key 'checksum' is missing"),
    (lambda m: m.update(samples="20"), "'samples' is '20', expected a JSON int"),
    (lambda m: m.update(sensor_size=[2, 34, 34]), "sensor_size [2, 34, 34], expected [H, W] or [channels]"),
    (lambda m: m.update(sensor_size=[34]), "file shapes disagree with T=3, N="),
    (lambda m: m["files"].pop("labels.npy"), "files: no entry for 'labels.npy'"),
])
def test_meta_json_missing_a_key_is_reported_and_rebuilt(root, tmp_path, capsys, edit, said):
    import json

    folder = build(root, tmp_path / "c")
    meta = json.loads((folder / "meta.json").read_text())
    edit(meta)
    (folder / "meta.json").write_text(json.dumps(meta))
    assert main(["data", "verify", str(folder)]) == 1
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
    build(root, tmp_path / "c")
    assert "rebuilding the frame cache" in capsys.readouterr().err
    assert check_cache(folder)["T"] == 3
