"""Issue 53.12: ``kill -9`` of a process during its first kernel build left the compilers (g++ and the
``cc1plus`` it starts) compiling into the cache with PID 1 as their parent.  The build's processes must
die with the process that started it.

A stand-in compiler does what g++ does: it answers ``--version``, and otherwise starts a child of its own
(``sleep``, as g++ starts ``cc1plus``) and waits for it.  Every process of the scenario carries a mark in
its environment, so those left behind are found in ``/proc`` whoever their parent is now."""
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists() or os.name != "posix",
                                reason="needs Linux's /proc")

BUILD = "from plif.kernels import cpu_build; cpu_build.load_library(); print(cpu_build.BUILD_ERROR)"


def _marked(mark: str) -> dict[int, str]:
    """pid -> command line of every live (not zombie) process whose environment holds ``mark``."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if mark.encode() not in (entry / "environ").read_bytes():
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def _until(condition, seconds: float):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    return condition()


def _stand_in(tmp_path, compile_body: str) -> tuple[dict, str]:
    """The environment of a build whose compiler is a shell script running ``compile_body`` (it says
    its version when asked), and the mark its processes carry."""
    cxx = tmp_path / "cxx"
    cxx.write_text(f'#!/bin/sh\ncase "$1" in --version) echo "stand-in 1.0"; exit 0;; esac\n{compile_body}')
    cxx.chmod(0o755)
    mark = f"plif-orphan-test-{uuid.uuid4().hex}"
    return {**os.environ, "CXX": str(cxx), "PLIF_CACHE_DIR": str(tmp_path / "cache"), "PLIF_ORPHAN_MARK": mark}, mark


def test_a_killed_build_leaves_no_compiler_running(tmp_path):
    env, mark = _stand_in(tmp_path, "sleep 300 &\nwait\n")
    build = subprocess.Popen([sys.executable, "-c", BUILD], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        started = _until(lambda: [p for p, cmd in _marked(mark).items() if cmd.startswith("sleep")], 120)
        assert started, "the stand-in compiler never started"
        os.kill(build.pid, signal.SIGKILL)
        build.wait()
        left = _until(lambda: not _marked(mark), 10)
        assert left, f"still running after the build's process was killed: {_marked(mark)}"
    finally:  # whatever the outcome, nothing of this test keeps running
        if build.poll() is None:
            build.kill()
            build.wait()
        for pid in _marked(mark):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def test_a_finished_build_leaves_nothing_running_either(tmp_path):
    """The stand-in fails at once (as a compiler without OpenMP would): the build ends, its warden with it."""
    env, mark = _stand_in(tmp_path, "exit 1\n")
    r = subprocess.run([sys.executable, "-c", BUILD], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "failed on" in r.stdout, r.stderr
    assert _until(lambda: not _marked(mark), 10), _marked(mark)
