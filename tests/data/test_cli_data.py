import json
import shlex

import numpy as np
import pytest

from plif.cli.main import main


def nmnist_file(path, events):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(bytes([x, y, (p << 7) | (t >> 16), (t >> 8) & 0xFF, t & 0xFF]) for x, y, p, t in events))
    return path


EVENTS = [(1, 2, 1, 10), (1, 2, 1, 20), (3, 4, 0, 30), (33, 33, 1, 40), (0, 0, 0, 50)]


def test_info(tmp_path, capsys):
    f = nmnist_file(tmp_path / "a.bin", EVENTS)
    assert main(["data", "info", str(f), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["format"] == "nmnist" and info["events"] == 5 and info["duration_us"] == 40
    assert tuple(info["sensor_size"]) == (34, 34)
    assert main(["data", "info", str(f)]) == 0
    assert "events:      5" in capsys.readouterr().out


def test_frames_and_cut(tmp_path):
    f = nmnist_file(tmp_path / "a.bin", EVENTS)
    out = tmp_path / "o" / "x.npy"
    assert main(["data", "frames", str(f), "--T", "2", "--out", str(out)]) == 0
    x = np.load(out)
    assert x.shape == (2, 2, 34, 34) and x.dtype == np.float32
    assert x[0, 1, 2, 1] == 2 and x[1, 0, 4, 3] == 1 and x[1, 1, 33, 33] == 1 and x.sum() == 5
    assert not list(out.parent.glob(".*tmp"))  # the temporary file was renamed, not left behind
    assert main(["data", "frames", str(f), "--T", "1", "--start", "20", "--end", "40", "--out", str(out)]) == 0
    assert np.load(out).sum() == 2


def test_show_writes_png(tmp_path):
    f = nmnist_file(tmp_path / "a.bin", EVENTS)
    out = tmp_path / "x.png"
    assert main(["data", "show", str(f), "--T", "3", "--out", str(out)]) == 0
    from plif_testing import assert_real_png, red_and_blue_pixels

    red, blue = red_and_blue_pixels(assert_real_png(out, min_side=150))
    assert red > 0 and blue > 0  # EVENTS has ON and OFF events


def test_errors_are_reported_not_raised(tmp_path, capsys, monkeypatch):
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"\x00" * 7)
    assert main(["data", "info", str(bad)]) == 2
    assert "bad.bin" in capsys.readouterr().err
    assert main(["data", "frames", str(tmp_path / "a.bin"), "--T", "2", "--sensor", "3x3", "--out", "x.npy"]) == 2
    capsys.readouterr()
    monkeypatch.setenv("PLIF_DATA_ROOT", str(tmp_path / "data"))
    assert main(["data", "prepare", "nmnist", "--T", "3"]) == 2  # no --root: training's default folder
    err = capsys.readouterr().err
    assert f"no 'Train' found under any of: {tmp_path / 'data' / 'nmnist'}," in err and "--data-dir" in err


def test_prepare_event_dataset(tmp_path, capsys):
    for d in range(10):
        nmnist_file(tmp_path / "nm" / "Test" / str(d) / "0.bin", EVENTS[: d % 5 + 1])
    rc = main(["data", "prepare", "nmnist", "--root", str(tmp_path / "nm"), "--T", "2", "--test-only",
               "--cache-dir", str(tmp_path / "cache"), "--workers", "0", "--quiet"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "nmnist test: samples (10, 2, 2, 34, 34) uint8, labels (10,) -> " + str(tmp_path / "cache") in out


def _modules_after(argv):
    """Run ``plif`` in a fresh interpreter and return the top-level modules it imported."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    src = str(Path(__file__).resolve().parents[2] / "src")
    code = ("import sys; from plif.cli.main import main; rc = main(sys.argv[1:]); "
            "print(sorted({m.split('.')[0] for m in sys.modules})); sys.exit(rc)")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()[-1]


def test_event_cli_does_not_import_torch(tmp_path):
    f = nmnist_file(tmp_path / "a.bin", EVENTS)
    for argv in (["data", "info", str(f)], ["data", "frames", str(f), "--T", "2", "--out", str(tmp_path / "x.npy")],
                 ["data", "show", str(f), "--T", "2", "--out", str(tmp_path / "x.png")],
                 ["data", "verify", "--cache-dir", str(tmp_path / "caches")]):
        mods = _modules_after(argv)
        assert "'numpy'" in mods and "'torch'" not in mods, (argv, mods)


def test_info_warns_about_an_empty_recording(tmp_path, capsys):
    f = tmp_path / "empty.bin"
    f.write_bytes(b"")
    assert main(["data", "info", str(f)]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and "empty.bin" in err and "no events" in err


def test_frame_errors_name_the_file(tmp_path, capsys):
    f = nmnist_file(tmp_path / "a.bin", EVENTS)
    assert main(["data", "frames", str(f), "--T", "2", "--sensor", "8,8", "--out", str(tmp_path / "x.npy")]) == 2
    err = capsys.readouterr().err
    assert "a.bin: event coordinates up to x=33" in err and not (tmp_path / "x.npy").exists()
    d = tmp_path / "dir.bin"
    d.mkdir()
    assert main(["data", "info", str(d)]) == 2
    assert "dir.bin: byte offset 0: is a directory" in capsys.readouterr().err


def test_prepare_refuses_an_empty_recording_unless_allowed(tmp_path, capsys):
    for d in range(10):
        nmnist_file(tmp_path / "nm" / "Test" / str(d) / "0.bin", EVENTS if d != 4 else [])
    args = ["data", "prepare", "nmnist", "--root", str(tmp_path / "nm"), "--T", "2", "--test-only",
            "--cache-dir", str(tmp_path / "cache"), "--workers", "0", "--quiet"]
    assert main(args) == 2
    assert "Test/4/0.bin: EmptyRecordingError: empty recording" in capsys.readouterr().err
    assert main(args + ["--allow-empty"]) == 0
    assert "samples (10, 2, 2, 34, 34)" in capsys.readouterr().out


def test_frames_refuse_silent_results(tmp_path, capsys):
    f = nmnist_file(tmp_path / "a.bin", EVENTS)
    out = tmp_path / "x.npy"
    cases = [(["--start", "1000", "--end", "0"], "--start 1000 must be less than --end 0"),
             (["--start", "1000"], "no events in the cut [1000, inf) us (the recording spans 10..50 us)"),
             (["--sensor", "0,0"], "--sensor 0,0: H and W must both be >= 1"),
             (["--sensor", "0,34"], "--sensor 0,34: H and W must both be >= 1"),
             (["--T", "1000000000"], "frames [1000000000, 2, 34, 34] (float32, integrated from int64 counts) needs")]
    for extra, said in cases:
        argv = ["data", "frames", str(f), "--out", str(out)] + (["--T", "2"] if "--T" not in extra else []) + extra
        assert main(argv) == 2, extra
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1, err
        assert not out.exists()
    empty = nmnist_file(tmp_path / "e.bin", [])
    assert main(["data", "frames", str(empty), "--T", "2", "--out", str(out)]) == 2
    assert "no events: an empty recording; --allow-empty" in capsys.readouterr().err
    assert main(["data", "frames", str(empty), "--T", "2", "--out", str(out), "--allow-empty"]) == 0
    assert np.load(out).shape == (2, 2, 34, 34)


def test_info_and_frames_share_one_sensor_rule(tmp_path, capsys):
    import struct
    head = b"#!AER-DAT3.1\r\n#!END-HEADER\r\n"  # no sensor named: DVS128 is assumed
    body = struct.pack("<Ii", (200 << 17) | (5 << 2) | 3, 10)  # x = 200: outside 128x128
    f = tmp_path / "wide.aedat"
    f.write_bytes(head + struct.pack("<hhiiiiii", 1, 1, 8, 4, 0, 1, 1, 1) + body)
    for argv in (["data", "info", str(f)], ["data", "frames", str(f), "--T", "1", "--out", str(tmp_path / "o.npy")]):
        assert main(argv) == 2
        assert "x=200, y=5 do not fit sensor (H, W) = (128, 128)" in capsys.readouterr().err
    for argv in (["data", "info", str(f), "--sensor", "6,201"],
                 ["data", "frames", str(f), "--T", "1", "--sensor", "6,201", "--out", str(tmp_path / "o.npy")]):
        assert main(argv) == 0
    capsys.readouterr()
    g = nmnist_file(tmp_path / "a.bin", EVENTS)
    assert main(["data", "info", str(g), "--sensor", "20,20"]) == 2
    assert "x=33, y=33 do not fit sensor (H, W) = (20, 20)" in capsys.readouterr().err


def aedat31_file(path, events):
    """AEDAT 3.1: the header, then one packet of polarity events (x, y, p, t)."""
    import struct

    body = b"".join(struct.pack("<Ii", x << 17 | y << 2 | p << 1 | 1, t) for x, y, p, t in events)
    n = len(events)
    path.write_bytes(b"#!AER-DAT3.1\r\n#!END-HEADER\r\n" + struct.pack("<hhiiiiii", 1, 1, 8, 4, 0, n, n, n) + body)
    return path


def test_timestamps_going_backwards_are_reported(tmp_path, capsys):
    """A camera's AEDAT file may hold a few events out of order: kept and reported.  (An ATIS .bin whose
    time goes backwards is refused: that is how text is told from a recording, test_ncaltech101.py.)"""
    f = aedat31_file(tmp_path / "a.aedat", [(1, 1, 1, 10), (2, 2, 1, 30), (3, 3, 0, 20), (4, 4, 1, 40)])
    assert main(["data", "info", str(f), "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["backward_steps"] == 1
    assert "timestamps go backwards at 1 event(s), first at event 2 (20 us after 30 us)" in cap.err
    assert main(["data", "frames", str(f), "--T", "2", "--out", str(tmp_path / "o.npy")]) == 0
    assert "warning:" in capsys.readouterr().err


def test_full_disk_names_the_file(tmp_path, capsys, monkeypatch):
    import errno
    import os

    f = nmnist_file(tmp_path / "a.bin", EVENTS)
    for d in range(10):
        nmnist_file(tmp_path / "nm" / "Test" / str(d) / "0.bin", EVENTS)

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(os, "fsync", full)
    out = tmp_path / "o.npy"
    assert main(["data", "frames", str(f), "--T", "2", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == f"plif data: error: {out}: No space left on device"
    assert not out.exists() and not list(tmp_path.glob(".o.npy*"))
    assert main(["data", "prepare", "nmnist", "--root", str(tmp_path / "nm"), "--T", "2", "--test-only",
                 "--cache-dir", str(tmp_path / "cache"), "--workers", "0", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "chunk_000000.npy: No space left on device; nothing half-written" in err and len(err.splitlines()) == 1


def test_older_caches_are_named_and_cleaned(tmp_path, capsys):
    root, cache = tmp_path / "nm", tmp_path / "cache"
    for d in range(10):
        nmnist_file(root / "Test" / str(d) / "0.bin", EVENTS)
    prep = ["data", "prepare", "nmnist", "--root", str(root), "--T", "2", "--test-only",
            "--cache-dir", str(cache), "--workers", "0", "--quiet"]
    assert main(prep) == 0
    assert "older frame cache" not in capsys.readouterr().err
    nmnist_file(root / "Test" / "3" / "1.bin", EVENTS)  # one more recording: a new cache folder
    assert main(prep) == 0
    err = capsys.readouterr().err
    assert "note: 1 older frame cache(s) of nmnist-test-T2-count take" in err and "plif data clean" in err
    old, new = sorted(cache.iterdir(), key=lambda p: (p / "meta.json").stat().st_mtime)
    (cache / "nmnist-test-T2-count-0123456789abcdef").mkdir()  # an unfinished build
    (cache / "notes").mkdir()  # not a cache: never touched
    assert main(["data", "clean", "--cache-dir", str(cache), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"would remove older {old}" in out and "would remove unfinished" in out and str(new) not in out
    assert old.exists()
    assert main(["data", "clean", "--cache-dir", str(cache)]) == 0
    assert sorted(p.name for p in cache.iterdir()) == sorted([new.name, "notes"])
    assert main(["data", "verify", str(new)]) == 0
    assert main(["data", "clean", "--cache-dir", str(cache), "--all"]) == 0
    assert [p.name for p in cache.iterdir()] == ["notes"]
    assert main(["data", "clean", "--cache-dir", str(tmp_path / "nope")]) == 2


def test_clean_skips_a_cache_being_built(tmp_path, capsys):
    import fcntl

    old = tmp_path / "nmnist-test-T2-count-0123456789abcdef"
    old.mkdir()
    with open(old / ".build.lock", "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a build holds it now
        assert main(["data", "clean", "--cache-dir", str(tmp_path)]) == 0
        assert "being built now" in capsys.readouterr().err and old.is_dir()
    assert main(["data", "clean", "--cache-dir", str(tmp_path)]) == 0
    assert not old.exists()


def test_prepare_refuses_T_zero_and_negative_workers(tmp_path, capsys):
    base = ["data", "prepare", "nmnist", "--root", str(tmp_path), "--test-only", "--quiet"]
    assert main(base + ["--T", "0"]) == 2  # was: 0 read as "not given", the default T used
    assert "--T must be >= 1, got 0" in capsys.readouterr().err
    assert main(base + ["--T", "3", "--workers", "-1"]) == 2
    assert "--workers must be >= 0" in capsys.readouterr().err


def test_prepare_verify_rebuilds_after_an_edit_that_kept_size_mtime_and_inode(tmp_path, capsys):
    """Loading trusts an unchanged stat; verify hashes, and its advice (prepare --verify) really rebuilds."""
    import os

    for d in range(10):
        nmnist_file(tmp_path / "nm" / "Test" / str(d) / "0.bin", EVENTS)
    args = ["data", "prepare", "nmnist", "--root", str(tmp_path / "nm"), "--T", "1", "--test-only",
            "--cache-dir", str(tmp_path / "cache"), "--workers", "0", "--quiet"]
    assert main(args) == 0
    (folder,) = (tmp_path / "cache").iterdir()
    rec = tmp_path / "nm" / "Test" / "3" / "0.bin"
    st = os.stat(rec)
    with open(rec, "r+b") as f:  # in place: same inode, same size, then the old mtime put back
        f.write(bytes([2, 2]))
    os.utime(rec, ns=(st.st_atime_ns, st.st_mtime_ns))
    capsys.readouterr()
    assert main(["data", "verify", str(folder)]) == 1
    err = capsys.readouterr().err
    assert f"{rec}: recording changed or missing" in err and "plif data prepare nmnist --verify --T 1" in err
    assert "just load it" not in err and " DIR" not in err
    advised = shlex.split(err.split("rebuild it: plif ", 1)[1].split(", or delete ", 1)[0])  # run as it is said
    assert advised[advised.index("--data-dir") + 1] == str(tmp_path / "nm")  # the real folder (issue 40)
    assert main(advised + ["--workers", "0", "--quiet"]) == 0
    assert f"rebuilding the frame cache: {rec}: recording changed" in capsys.readouterr().err
    assert main(["data", "verify", str(folder)]) == 0
    assert np.load(folder / "frames.npy")[3, 0, 1, 2, 2] == 1  # the edited first event: x=2, y=2, ON


def test_verify_reports_every_folder_that_looks_like_a_damaged_cache(tmp_path, capsys):
    for d in range(10):
        nmnist_file(tmp_path / "nm" / "Test" / str(d) / "0.bin", EVENTS)
    assert main(["data", "prepare", "nmnist", "--root", str(tmp_path / "nm"), "--T", "1", "--test-only",
                 "--cache-dir", str(tmp_path / "cache"), "--workers", "0", "--quiet"]) == 0
    (folder,) = (tmp_path / "cache").iterdir()
    renamed = tmp_path / "cache" / "my-copy"
    (renamed / "chunks").mkdir(parents=True)  # not named like a cache, but holds a cache's files
    (tmp_path / "cache" / "notes").mkdir()  # anything else is left alone
    (folder / "meta.json").unlink()
    capsys.readouterr()
    assert main(["data", "verify", "--cache-dir", str(tmp_path / "cache")]) == 1
    err = capsys.readouterr().err
    assert f"{folder / 'meta.json'}: missing: not a finished frame cache" in err
    assert f"{renamed / 'meta.json'}: missing" in err and "notes" not in err and len(err.splitlines()) == 2


def test_a_byte_identical_copy_of_a_test_recording_in_train_is_a_leak(tmp_path, capsys):
    """A symlink across splits is refused by path; a copy by the content hash the cache keeps anyway."""
    import shutil

    for split, t0 in (("Train", 100), ("Test", 200)):
        for d in range(10):
            nmnist_file(tmp_path / "nm" / split / str(d) / "0.bin", [(1, 2, 1, t0 + d), (3, 4, 0, t0 + 50)])
    args = ["data", "prepare", "nmnist", "--root", str(tmp_path / "nm"), "--T", "1",
            "--cache-dir", str(tmp_path / "cache"), "--workers", "0", "--quiet"]
    assert main(args) == 0
    shutil.copy(tmp_path / "nm" / "Test" / "3" / "0.bin", tmp_path / "nm" / "Train" / "5" / "1.bin")
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert (f"{tmp_path / 'nm' / 'Train' / '5' / '1.bin'} (train) holds the same bytes as "
            f"{tmp_path / 'nm' / 'Test' / '3' / '0.bin'} (test) (1 such): a train/test leak") in err
    assert main(args[:-1] + ["--quiet", "--test-only"]) == 2  # the other split finds it the same way


def test_a_copy_across_splits_is_refused_before_any_cache_is_built(tmp_path, capsys):
    """The file lists are known first: sizes, then hashes of the files alike, compared before a
    frame is integrated, from either split; plif train loads through the same call."""
    import shutil

    from plif.catalog import get_dataset
    from plif.data.events.load import prepare_event_frames

    for split, t0 in (("Train", 100), ("Test", 200)):
        for d in range(10):
            nmnist_file(tmp_path / "nm" / split / str(d) / "0.bin", [(1, 2, 1, t0 + d), (3, 4, 0, t0 + 50)])
    shutil.copy(tmp_path / "nm" / "Train" / "2" / "0.bin", tmp_path / "nm" / "Test" / "7" / "1.bin")
    cache = tmp_path / "cache"
    args = ["data", "prepare", "nmnist", "--root", str(tmp_path / "nm"), "--T", "1",
            "--cache-dir", str(cache), "--workers", "0", "--quiet"]
    for only, said in (("--train-only", "Train/2/0.bin (train) holds the same bytes as"),
                       ("--test-only", "Test/7/1.bin (test) holds the same bytes as")):
        assert main(args + [only]) == 2
        assert said in capsys.readouterr().err
        assert not cache.exists()  # refused before any cache
    with pytest.raises(ValueError, match="a train/test leak"):
        prepare_event_frames(get_dataset("nmnist"), tmp_path / "nm", 1, True, cache_dir=cache, workers=0, progress=False)
    assert not cache.exists()


def test_prepare_hashes_every_recording_in_full(tmp_path, capsys):
    """An edit in the middle of a large recording, size, inode and mtime put back, escapes the load's
    check of the first and last 64 KiB; plain prepare (no --verify) hashes it and rebuilds, saying so."""
    import os

    for d in range(10):
        nmnist_file(tmp_path / "nm" / "Test" / str(d) / "0.bin", EVENTS)
    rec = nmnist_file(tmp_path / "nm" / "Test" / "3" / "0.bin", [(1, 1, 1, t) for t in range(40_000)])  # 200 kB
    args = ["data", "prepare", "nmnist", "--root", str(tmp_path / "nm"), "--T", "1", "--test-only",
            "--cache-dir", str(tmp_path / "cache"), "--workers", "0", "--quiet"]
    assert main(args) == 0
    st = os.stat(rec)
    with open(rec, "r+b") as f:
        f.seek(100_000)  # event 20,000: x = 2, y = 2
        f.write(bytes([2, 2]))
    os.utime(rec, ns=(st.st_atime_ns, st.st_mtime_ns))
    capsys.readouterr()
    assert main(args) == 0
    assert f"rebuilding the frame cache: {rec}: recording changed" in capsys.readouterr().err
    (folder,) = (tmp_path / "cache").iterdir()
    assert np.load(folder / "frames.npy")[3, 0, 1, 2, 2] == 1


def test_a_root_that_is_a_file_is_named(tmp_path, capsys):
    f = tmp_path / "notes.txt"
    f.write_text("not a folder")
    for argv in (["data", "download", "nmnist", "--root", str(f)], ["data", "prepare", "mnist", "--root", str(f)],
                 ["data", "prepare", "nmnist", "--root", str(f), "--workers", "0"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"{f}: is a file, not a folder (--data-dir names" in err and len(err.strip().splitlines()) == 1, argv


def test_a_build_error_names_the_recording_once(tmp_path, capsys):
    for d in range(10):
        nmnist_file(tmp_path / "nm" / "Test" / str(d) / "0.bin", EVENTS)
    bad = tmp_path / "nm" / "Test" / "3" / "0.bin"
    bad.write_bytes(b"\x00\x01\x80\x00")  # 4 of 5 bytes
    assert main(["data", "prepare", "nmnist", "--root", str(tmp_path / "nm"), "--T", "1", "--test-only",
                 "--cache-dir", str(tmp_path / "cache"), "--workers", "0", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: EventFormatError: byte offset 0: truncated event: 4 of 5 bytes" in err and err.count(str(bad)) == 1


@pytest.mark.parametrize("argv,message", [
    (["prepare", "fashion-mnist", "--T", "4", "--split", "time"], "--T, --split: no effect on fashion-mnist, a static "
                                                                  "dataset (images, no frames and no frame cache)"),
    (["prepare", "mnist", "--cache-dir", "c", "--workers", "0", "--no-flip-x", "--allow-empty", "--verify"],
     "--cache-dir, --workers, --no-flip-x, --allow-empty, --verify: no effect on mnist"),
    (["prepare", "nmnist", "--no-download"], "--no-download: no effect on nmnist, an event dataset: prepare never"),
    (["prepare", "nmnist", "--no-flip-x"], "--no-flip-x: no effect on nmnist, whose recordings are not jAER's AEDAT "
                                           "2.0 (it is for cifar10-dvs)"),
    (["download", "fashion-mnist", "--keep-archives"], "--keep-archives: no effect on fashion-mnist"),
    (["verify", "c", "--cache-dir", "."], "--cache-dir has no effect when cache folders are named"),
    (["clean", "--cache-dir", ".", "--dataset", "mnist"], "--dataset mnist: a static dataset, which has no frame caches"),
    (["clean", "--cache-dir", ".", "--dataset", "nope"], "unknown dataset 'nope'; valid: mnist"),
])
def test_options_that_would_do_nothing_are_refused(argv, message, tmp_path, capsys, monkeypatch):
    """Issue 39.4: each refused before any work, with the reason (--no-flip-x on N-MNIST was a TypeError)."""
    monkeypatch.chdir(tmp_path)
    assert main(["data", *argv, "--data-dir", str(tmp_path / "none")] if argv[0] in ("prepare", "download")
                else ["data", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_copy_check_is_kept_beside_the_cache_and_done_again_when_a_recording_changes(tmp_path, monkeypatch):
    """Lists found free of copies are not compared again by a later start (N-MNIST: the first 4 KiB of
    nearly every file each time); an edit in place that makes a copy, size and mtime put back, is
    compared and refused all the same (its ctime moved), and ``prepare`` (hash_sources) always compares."""
    import os

    from plif.catalog import get_dataset
    from plif.data.events import load

    for split, t0 in (("Train", 100), ("Test", 200)):
        for d in range(10):
            nmnist_file(tmp_path / "nm" / split / str(d) / "0.bin", [(1, 2, 1, t0 + d), (3, 4, 0, t0 + 50)])
    compared, real = [], load.same_bytes
    monkeypatch.setattr(load, "same_bytes", lambda *a, **k: compared.append(1) or real(*a, **k))
    monkeypatch.setattr(load, "_COMPARED", set())  # what this process has compared: nothing yet

    def start(**kw):  # a training start: both splits
        load._COMPARED.clear()
        return [load.prepare_event_frames(get_dataset("nmnist"), tmp_path / "nm", 1, train, cache_dir=tmp_path / "c",
                                          workers=0, progress=False, **kw) for train in (True, False)]

    with pytest.raises(ValueError, match="lower --T"):  # refused after the comparison: no folder is left for it
        load.prepare_event_frames("nmnist", tmp_path / "nm", 10**9, True, cache_dir=tmp_path / "c", workers=0)
    assert not (tmp_path / "c").exists()
    folders = start()
    assert len(compared) == 2  # the test split after the train split: the same two lists
    assert (folders[0] / load.NO_COPIES).read_text() == (folders[1] / load.NO_COPIES).read_text()
    assert start() == folders and len(compared) == 2  # a later start reads the verdict
    start(hash_sources=True)
    assert len(compared) == 3
    rec, twin = tmp_path / "nm" / "Train" / "2" / "0.bin", tmp_path / "nm" / "Test" / "7" / "0.bin"
    st = os.stat(rec)
    with open(rec, "r+b") as f:  # in place: same inode and size, then the old mtime put back
        f.write(twin.read_bytes())
    os.utime(rec, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(ValueError, match=f"{rec} \\(train\\) holds the same bytes as {twin} \\(test\\)"):
        start()
