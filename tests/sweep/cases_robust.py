"""Issue 45's classes: a damaged compiled kernel library, an empty ``PLIF_CACHE_DIR``, ``plif data
verify`` given raw recordings or a cache holding a user's file (never told to delete them), an
N-Caltech101 file described, and a custom surrogate only a script registered."""
from __future__ import annotations

from pathlib import Path

from .case import Case, Env, SkipCase
from .cases_cache import _built
from .damage import nmnist_tree, truncate_file, write

FORWARD = ("import torch; from plif.neurons import PLIF; x = torch.randn(3, 2, 4, requires_grad=True); "
           "PLIF()(x).sum().backward(); print('ran')")
LOCATE = "from plif.kernels import cpu_build; assert cpu_build.load_library() is not None; print(cpu_build.loaded_library())"


def _truncated_library(fraction: float):
    """A library built into the case's own cache, then cut to ``fraction``; then a command runs.  The
    "compiler" copies the library the suite built (a real g++ build takes 15-40 s, minutes on a busy machine)."""
    def run(env: Env):
        r = env.python(LOCATE, timeout=600)
        if r.returncode != 0:
            raise SkipCase(f"no CPU kernel library here: {r.stderr.strip()[-200:]}")
        good = Path(r.stdout.strip().splitlines()[-1])
        cxx = write(env.tmp / "fake-cxx", ('#!/bin/sh\ncase "$*" in *--version*) echo fake 1; exit 0;; esac\n'
                                            'for a; do out=$a; done\n'
                                            f'case " $* " in *" -c "*) : > "$out";; *) cp {good} "$out";; esac\n').encode())
        cxx.chmod(0o755)
        own = {"PLIF_CACHE_DIR": str(env.tmp / "cache"), "CXX": str(cxx)}
        r = env.python(LOCATE, env=own)  # the case's cache as a finished build leaves it
        if r.returncode != 0:
            raise RuntimeError(f"the build before the damage failed: {r.stderr.strip()[-300:]}")
        built = Path(r.stdout.strip().splitlines()[-1])
        truncate_file(built, int(built.stat().st_size * fraction))
        return env.python(FORWARD, env=own)
    return run


def _older_plifs_library(env: Env):
    """``plif doctor`` over a cache holding an older plif's library (no size/hash record beside it)
    as well as this plif's own (the suite's, copied in with its record)."""
    r = env.python(LOCATE, timeout=600)
    if r.returncode != 0:
        raise SkipCase(f"no CPU kernel library here: {r.stderr.strip()[-200:]}")
    good = Path(r.stdout.strip().splitlines()[-1])
    own = env.tmp / "cache" / "kernels" / good.parent.name
    own.mkdir(parents=True)
    for f in good.parent.iterdir():
        write(own / f.name, f.read_bytes())
    write(env.tmp / "cache" / "kernels" / "0123456789abcdef" / good.name, good.read_bytes())
    return env.plif("doctor", "--quick", timeout=600, extra_env={"PLIF_CACHE_DIR": str(env.tmp / "cache")})


def _a_note_with_its_remedy(tmp, r):
    if "note: never loaded by this plif; to free its space: rm -r" not in r.stdout:
        return f"no note naming how to remove the older library: {r.stdout.strip()[-300:]!r}"
    return None


def _one_line_and_rebuilt(tmp, r):
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    if len(lines) != 1 or "is damaged" not in lines[0] or "rebuilding it" not in lines[0]:
        return f"expected one line saying the library is damaged and rebuilt, got {r.stderr.strip()[-300:]!r}"
    return None if r.stdout.strip() == "ran" else "the command did not run after the rebuild"


def _nothing_in_cwd(tmp, r):
    if any(not p.name.strip() for p in tmp.iterdir()):
        return "made a folder named by blanks in the working directory"
    return "compiled into the working directory" if (tmp / "kernels").exists() else None


def _no_delete_advice(tmp, r):
    if "delete" in r.stderr:
        return "advises deleting a folder plif did not write"
    return None if len(list((tmp / "nm").rglob("*.bin"))) == 20 else "a recording is gone"


def _users_file_cache(env: Env):
    folder = _built(env)
    write(folder / "my-notes.txt", b"mine")
    (folder / "labels.npy").write_bytes(b"damaged")
    return env.plif("data", "verify", str(folder))


def _users_file_kept(tmp, r):
    if "or delete" in r.stderr:
        return "advises deleting a cache that holds a user's file"
    return None if any(p.name == "my-notes.txt" for p in (tmp / "cache").rglob("*")) else "the user's file is gone"


def _atis_label(tmp, r):
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("format:")), "")
    return None if "atis-bin" in line and "nmnist" not in line else f"labelled {line!r}"


SCRIPTED = """
import sys
from plif.surrogate import register_surrogate
from plif.train import TrainConfig, train
register_surrogate("scripted", grad=lambda x, a: x * 0 + 1)
try:
    train(TrainConfig(dataset="fashion-mnist", surrogate="scripted", epochs=1, device="cpu", out="run"))
except ValueError as e:
    print(f"python: error: {e}", file=sys.stderr)
    sys.exit(2)
"""


def _scripted_refused(tmp, r):
    if (tmp / "run").exists():
        return "a run folder was written"
    return None if "registered by a script" in r.stderr and "MODULE:scripted" in r.stderr else "the fix is not said"


def _killed_first_build(env: Env):
    """issue 53.12: the first kernel build (the real g++, a fresh cache) killed with SIGKILL once a cc1plus
    runs; every process of the scenario carries a mark in its environment, found in /proc whoever its parent."""
    import os
    import shutil
    import signal
    import time
    import uuid

    from .case import Result

    if shutil.which("g++") is None or not Path("/proc/self/environ").exists():
        raise SkipCase("needs g++ and Linux's /proc")
    mark = f"plif-sweep-orphan-{uuid.uuid4().hex}"

    def marked(name: str = "") -> list[int]:
        found = []
        for entry in Path("/proc").iterdir():
            try:
                if (entry.name.isdigit() and mark.encode() in (entry / "environ").read_bytes()
                        and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
                        and name.encode() in (entry / "cmdline").read_bytes()):
                    found.append(int(entry.name))
            except OSError:
                continue
        return found

    def until(condition, seconds):
        end = time.monotonic() + seconds
        while not condition() and time.monotonic() < end:
            time.sleep(0.1)
        return condition()

    t0 = time.perf_counter()
    p = env.plif(python="from plif.kernels import cpu_build; cpu_build.load_library()", wait=False,
                 extra_env={"PLIF_CACHE_DIR": str(env.tmp / "cache"), "CXX": "g++", "PLIF_SWEEP_MARK": mark})
    try:
        if not until(lambda: marked("cc1plus"), 180):
            return Result(2, "", "sweep: error: no cc1plus started\n", time.perf_counter() - t0)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        clean = until(lambda: not marked(), 10)
        left = "" if clean else f"left running: {len(marked())} processes ({len(marked('cc1plus'))} cc1plus)"
        return Result(0, left, "", time.perf_counter() - t0)
    finally:
        for pid in marked():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


# issue 53.6: oneDNN's older name for its ISA cap; a CPU with native bf16 is faked by its flags
_AMP_AUTO = ("import pathlib; from plif.layers.precision import native_bf16; "
             "f = pathlib.Path('cpuinfo'); f.write_text('flags : avx512f avx512_bf16 amx_bf16\\n'); "
             "print('bf16' if native_bf16(str(f)) else 'fp32')")


def _fp32_under_cap(tmp, r):
    return None if r.stdout.strip() == "fp32" else f"--amp auto picks {r.stdout.strip()!r} under an AVX2 ISA cap"


CASES = [
    Case("kernel-library-truncated-to-a-third", "disk", expect="ok", run=_truncated_library(1 / 3),
         check=_one_line_and_rebuilt),
    Case("kernel-library-truncated-to-nine-tenths", "disk", expect="ok", run=_truncated_library(9 / 10),
         check=_one_line_and_rebuilt),
    Case("doctor-over-an-older-plifs-library", "disk", expect="ok", run=_older_plifs_library,
         check=_a_note_with_its_remedy),
    Case("kernel-cache-dir-empty", "disk", expect="ok", check=_nothing_in_cwd,
         run=lambda env: env.python(FORWARD, timeout=600, env={"PLIF_CACHE_DIR": ""})),
    *(Case(f"kernel-cache-dir-blank#{i}", "disk", expect="ok", check=_nothing_in_cwd,  # issue 53.8
           run=lambda env, v=value: env.python(FORWARD, timeout=600, env={"PLIF_CACHE_DIR": v, "PLIF_DATA_ROOT": v}))
      for i, value in enumerate(["  ", "\t"])),
    Case("kill-9-during-the-first-kernel-build", "kill", expect="ok", run=_killed_first_build, timeout=240,
         check=lambda tmp, r: r.stdout.strip() or None),
    Case("amp-auto-under-dnnl-isa-cap", "api", expect="ok", check=_fp32_under_cap,
         run=lambda env: env.python(_AMP_AUTO, env={"DNNL_MAX_CPU_ISA": "AVX2", "ONEDNN_MAX_CPU_ISA": ""})),
    Case("verify-raw-recordings", "cache", ["data", "verify", "{tmp}/nm"], check=_no_delete_advice,
         setup=lambda tmp: nmnist_tree(tmp / "nm", per_class=1)),
    Case("verify-a-damaged-cache-holding-a-users-file", "cache", run=_users_file_cache, check=_users_file_kept),
    Case("info-ncaltech101-recording", "events", ["data", "info", "{tmp}/image_0001.bin", "--sensor", "180,240"],
         expect="ok", check=_atis_label,
         setup=lambda tmp: write(tmp / "image_0001.bin", bytes([239, 179, 0x80, 0, 10, 3, 4, 0, 0, 20]))),
    Case("train-a-surrogate-only-a-script-registered", "api", run=lambda env: env.python(SCRIPTED, timeout=300),
         check=_scripted_refused),
]
