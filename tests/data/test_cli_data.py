import json

import numpy as np

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


def test_errors_are_reported_not_raised(tmp_path, capsys):
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"\x00" * 7)
    assert main(["data", "info", str(bad)]) == 2
    assert "bad.bin" in capsys.readouterr().err
    assert main(["data", "frames", str(tmp_path / "a.bin"), "--T", "2", "--sensor", "3x3", "--out", "x.npy"]) == 2
    assert main(["data", "prepare", "nmnist", "--T", "3"]) == 2
    assert "--root" in capsys.readouterr().err


def test_prepare_event_dataset(tmp_path, capsys):
    for d in range(10):
        nmnist_file(tmp_path / "nm" / "Test" / str(d) / "0.bin", EVENTS[: d % 5 + 1])
    rc = main(["data", "prepare", "nmnist", "--root", str(tmp_path / "nm"), "--T", "2", "--test-only",
               "--cache-dir", str(tmp_path / "cache"), "--workers", "0", "--quiet"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "nmnist test: frames (10, 2, 2, 34, 34) uint8" in out and str(tmp_path / "cache") in out


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
    assert "frames (10, 2, 2, 34, 34)" in capsys.readouterr().out
