"""Compile the ``cpu_neuron_*.cpp``, ``cpu_block_*.cpp`` and ``cpu_pool.cpp`` into one library, once per machine, and load it with ctypes.

The library has no PyTorch headers, but its many template variants take a while to optimise: one
g++ call took 24 s on a 2-core AMD EPYC (-O3 -march=native, nearly all of it the neuron templates),
so each input type is a translation unit of its own and they compile in parallel.  Concurrent
processes wait for one build (a lock beside the library) instead of repeating it.  It is cached under
``$PLIF_CACHE_DIR`` (default ``~/.cache/plif``) in a folder named by a hash of the sources, the
compiler command and the compiler's version, and written atomically, so concurrent processes and
edited sources never see a half-written or stale library.  Beside it, a record of its size and
SHA-256 (written atomically after it) is checked before every load: a library damaged later (a full
disk, a killed copy, a truncation) would otherwise be mapped by ``dlopen`` and kill the process with
SIGBUS and no word; a damaged or unrecorded one is rebuilt instead, with one line.  Any failure (no compiler, no OpenMP,
read-only cache) leaves :func:`load_library` returning ``None`` and the caller falls back to the
PyTorch backward; the reason is kept in :data:`BUILD_ERROR`.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import torch

from ..atomic import atomic_path, atomic_write_json
from ..catalog import env_folder
from ..filelock import FileLock

__all__ = ["load_library", "library_or_raise", "unavailable", "SUFFIX", "BUILD_ERROR", "cache_dir", "library_damage", "UNRECORDED",
           "cached_libraries", "loaded_library"]

# one translation unit per input type, compiled in parallel: nearly all the build is the neuron
# templates' variants (80 backward and 12 forward a type)
SOURCES = tuple(Path(__file__).with_name(name) for name in
                ("cpu_neuron_f32.cpp", "cpu_neuron_f64.cpp", "cpu_neuron_bf16.cpp", "cpu_block_f32.cpp",
                 "cpu_block_f64.cpp", "cpu_block_bf16.cpp", "cpu_pool.cpp"))
HEADERS = (Path(__file__).with_name("cpu_neuron.h"), Path(__file__).with_name("cpu_block.h"))
# -ffp-contract=off keeps H_t bit-identical to the PyTorch reference (no fused multiply-add).
# -fno-trapping-math lets GCC compute both sides of a choice between floats and blend them (the same
# values: it reorders nothing and contracts nothing, it only stops treating a product such as ∂V·(1−S)
# as a possible trap it must branch around): without it the backward loops of a hard reset with the
# reset detached, the paper's PLIF, stayed scalar (GCC 12's "control flow in loop" refusals in the fp32
# build: the block's 28 -> 4, the neuron's 40 -> 0; the block's backward a third of its time, AVX2 EPYC)
FLAGS = ["-O3", "-std=c++17", "-fPIC", "-shared", "-fopenmp", "-ffp-contract=off", "-fno-math-errno",
         "-fno-trapping-math"]
# Tried first: this CPU's vector width (AVX-512 here: the neuron sweeps do two divisions per
# element in backward; a cpu-preset training step took 84.5 instead of 88.6 ms, one thread, this
# 2-core AMD EPYC).  Same IEEE operations, no contraction, so the same bits.  The cache key names
# the CPU, so a cache shared between machines never hands one a library built for another; a
# compiler that refuses the flag gets the portable build.
NATIVE = ["-march=native"]

SUFFIX = {torch.float32: "f32", torch.float64: "f64", torch.bfloat16: "bf16"}  # the symbols' suffix by input dtype
BUILD_ERROR: str | None = None
_lib: ctypes.CDLL | None = None
_lib_path: Path | None = None
_tried = False
_lock = threading.Lock()

_P = ctypes.c_void_p
_I64 = ctypes.c_int64
_INT = ctypes.c_int
_D = ctypes.c_double
_FORWARD_ARGS = [_P] * 6 + [_I64, _I64, _I64, _INT, _INT, _INT, _D, _D, _INT]
_BACKWARD_ARGS = [_P] * 8 + [_I64, _I64] + [_INT] * 6 + [_D] * 4 + [_INT]
_POOL_ARGS = [_P] * 3 + [_I64, _I64, _I64, _INT, _I64, _INT]  # (in, out, offsets/∂x, planes, H, W, k, s, threads)
# the fused block (cpu_block.h): pointers, then T, B, C, H, W, y_step, flags, constants, threads
_BLOCK_FORWARD_ARGS = [_P] * 8 + [_I64] * 6 + [_INT] * 4 + [_D, _D, _INT]
_BLOCK_BACKWARD_ARGS = [_P] * 14 + [_I64] * 6 + [_INT] * 8 + [_D] * 4 + [_INT]
_BACKWARD_INTO_Y_ARGS = [_P] * 14 + [_I64] * 5 + [_INT] * 8 + [_D] * 4 + [_INT]
_BN_GRAD_ARGS = [_P] * 8 + [_I64] * 3 + [_INT, _INT]
_STATS_ARGS = [_P] * 3 + [_I64] * 5 + [_INT]


def cache_dir() -> Path:
    """``$PLIF_CACHE_DIR/kernels``; an empty or blank ``PLIF_CACHE_DIR`` counts as unset
    (``~/.cache/plif``), not as the working directory or a folder named by blanks
    (:func:`plif.catalog.env_folder`)."""
    return env_folder("PLIF_CACHE_DIR", Path.home() / ".cache" / "plif") / "kernels"


def _record_path(library: Path) -> Path:
    return library.with_name(library.name + ".json")


def _digest(path: Path) -> dict:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return {"size": path.stat().st_size, "sha256": h.hexdigest()}


UNRECORDED = "has no readable size and hash record (an interrupted build or an older plif)"


def library_damage(library: Path) -> str | None:
    """Why the cached ``library`` must not be loaded (missing, unrecorded, a size or hash other than
    the one recorded when it was built), or ``None`` when it is whole.  Reads the file (3 MB: a few ms)."""
    if not library.is_file():
        return "is missing"
    try:
        record = json.loads(_record_path(library).read_text())
        want_size, want_hash = int(record["size"]), str(record["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return UNRECORDED
    try:
        have = _digest(library)
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if have["size"] != want_size:
        return f"is damaged: {have['size']} bytes where {want_size} were built"
    if have["sha256"] != want_hash:
        return "is damaged: its SHA-256 differs from the one recorded when it was built"
    return None


def cached_libraries() -> dict[Path, str | None]:
    """Every library in :func:`cache_dir` with :func:`library_damage`'s verdict (``plif doctor``)."""
    root = cache_dir()
    found = sorted(root.glob("*/libplif_cpu_neuron.so")) if root.is_dir() else []
    return {lib: library_damage(lib) for lib in found}


def loaded_library() -> Path | None:
    """The file this process loaded, or ``None`` (none loaded yet, or it could not be had)."""
    return _lib_path


def _compiler() -> str | None:
    return os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")


def _cpu_id() -> str:
    """What ``-march=native`` depends on: the CPU's model and feature flags (Linux), else the platform."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [ln for ln in f.read(1 << 16).splitlines()
                     if ln.split(":")[0].strip() in ("model name", "flags", "Features", "CPU part")]
        if lines:
            return "\n".join(dict.fromkeys(lines))  # first core's lines, once each
    except OSError:
        pass
    return f"{platform.machine()} {platform.processor()}"


def _target(cxx: str, flags: list[str], version: str) -> Path:
    """Where the build with ``flags`` is cached: named by the sources, compiler, flags and, for a
    native build, the CPU."""
    text = b"".join(src.read_bytes() for src in SOURCES + HEADERS)
    ident = " ".join([cxx, *flags, version]) + (_cpu_id() if NATIVE[0] in flags else "")
    return cache_dir() / hashlib.sha256(text + ident.encode()).hexdigest()[:16] / "libplif_cpu_neuron.so"


def _build_with(cxx: str, flags: list[str], version: str) -> Path:
    target = _target(cxx, flags, version)
    if library_damage(target) is None:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(target.with_name(target.name + ".lock"))
    lock.acquire()  # a process building the same library now: wait for it instead of compiling it twice
    try:
        damage = library_damage(target)
        if damage is None:
            return target
        if target.exists():
            print(f"plif: the cached CPU kernel library {target} {damage}; rebuilding it (about 15-40 s)",
                  file=sys.stderr, flush=True)
        with atomic_path(target) as tmp, tempfile.TemporaryDirectory(dir=target.parent) as objs:
            compile_ = [flag for flag in flags if flag != "-shared"] + ["-c"]
            units = [(src, Path(objs) / f"{src.stem}.o") for src in SOURCES]
            _run_all(cxx, [[cxx, *compile_, str(src), "-o", str(obj)] for src, obj in units], [src for src, _ in units])
            _run_all(cxx, [[cxx, *flags, *(str(obj) for _, obj in units), "-o", str(tmp)]], ["the link"])
            record = _digest(tmp)
        # after the library: a process killed between the two leaves a stale record, which fails the check
        atomic_write_json(_record_path(target), record)
    finally:
        lock.release()
    return target


# The compilers' warden: the leader of the process group every compiler (and what g++ starts: cc1plus,
# as) joins; it waits for its stdin to close, which happens when the build ends or the process that
# started it dies (kill -9 included), then kills the whole group, itself last.
_WARDEN = ["/bin/sh", "-c", "cat >/dev/null; kill -9 0"]


def _run_all(cxx: str, commands: list[list[str]], what: list) -> None:
    """Run the compiler ``commands`` at once; the first failure's output, naming what it built.  The
    compilers and their children die with this process, however it ends (:data:`_WARDEN`): a
    ``kill -9`` during a first build left a dozen ``cc1plus`` compiling into the cache with no parent."""
    warden = _start_warden()
    join = {} if warden is None else (
        {"process_group": warden.pid} if sys.version_info >= (3, 11) else {"preexec_fn": lambda: os.setpgid(0, warden.pid)})
    procs = []
    try:
        procs += [subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   text=True, **join) for cmd in commands]
        errors = [p.communicate(timeout=300)[1] for p in procs]
    finally:  # a timeout (or an interrupt) leaves no compiler running behind the caller's fallback
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if warden is not None:  # its stdin closed: it kills what is left of the group (g++'s children)
            warden.stdin.close()
            warden.wait()
    for p, err, name in zip(procs, errors, what):
        if p.returncode != 0:
            raise RuntimeError(f"{cxx} failed on {name}:\n{err[-2000:]}")


def _start_warden() -> subprocess.Popen | None:
    """The group leader of :data:`_WARDEN`, or None where there are no POSIX process groups."""
    if os.name != "posix" or not os.path.exists(_WARDEN[0]):
        return None
    group = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": lambda: os.setpgid(0, 0)}
    return subprocess.Popen(_WARDEN, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            **group)


def _build(cxx: str) -> Path:
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout
    if not any(_target(cxx, flags, version).exists() for flags in (FLAGS + NATIVE, FLAGS)):
        # the first use on a machine waits for g++ (15-40 s): say so, or the first network built looks hung
        print(f"plif: compiling the CPU kernels for this machine, once ({len(SOURCES)} files, about 15-40 s; "
              f"cached in {cache_dir()})", file=sys.stderr, flush=True)
    try:
        return _build_with(cxx, FLAGS + NATIVE, version)
    except RuntimeError:
        return _build_with(cxx, FLAGS, version)


def load_library() -> ctypes.CDLL | None:
    """The compiled library (building it on first use), or ``None`` if it cannot be had."""
    global _lib, _lib_path, _tried, BUILD_ERROR
    with _lock:
        if _tried:
            return _lib
        _tried = True
        cxx = _compiler()
        try:
            if cxx is None:
                raise RuntimeError("no C++ compiler found (set CXX or install g++)")
            missing = [str(src) for src in SOURCES + HEADERS if not src.exists()]
            if missing:
                raise RuntimeError(f"kernel source missing: {', '.join(missing)}")
            path = _build(cxx)
            lib = ctypes.CDLL(str(path))
            lib.plif_forward_bf16.argtypes, lib.plif_backward_bf16.argtypes = _FORWARD_ARGS, _BACKWARD_ARGS
            for dtype in ("f32", "f64", "bf16"):
                getattr(lib, f"plif_block_forward_{dtype}").argtypes = _BLOCK_FORWARD_ARGS
                getattr(lib, f"plif_block_backward_{dtype}").argtypes = _BLOCK_BACKWARD_ARGS
                getattr(lib, f"plif_block_backward_into_y_{dtype}").argtypes = _BACKWARD_INTO_Y_ARGS
                getattr(lib, f"plif_bn_input_grad_{dtype}").argtypes = _BN_GRAD_ARGS
                getattr(lib, f"plif_batch_stats_{dtype}").argtypes = _STATS_ARGS
            for dtype in ("f32", "f64"):
                getattr(lib, f"plif_forward_{dtype}").argtypes = _FORWARD_ARGS
                getattr(lib, f"plif_backward_{dtype}").argtypes = _BACKWARD_ARGS
                getattr(lib, f"plif_max_pool_forward_{dtype}").argtypes = _POOL_ARGS
                getattr(lib, f"plif_max_pool_backward_{dtype}").argtypes = _POOL_ARGS
            _lib, _lib_path = lib, path
        except (OSError, RuntimeError, subprocess.SubprocessError) as e:
            BUILD_ERROR = str(e)
        return _lib


def unavailable() -> str | None:
    """Why the library cannot be had (building it now if needed), or ``None`` when it can."""
    if load_library() is not None:
        return None
    return BUILD_ERROR or "the library did not load"


def library_or_raise(what: str) -> ctypes.CDLL:
    """The library, or a ``RuntimeError`` saying that ``what`` (a kernel's name) is unavailable and why."""
    lib = load_library()
    if lib is None:
        raise RuntimeError(f"the {what} is unavailable: {unavailable()}")
    return lib
