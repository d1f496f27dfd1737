"""Compile ``cpu_neuron.cpp`` and ``cpu_pool.cpp`` into one library, once per machine, and load it with ctypes.

The library has no PyTorch headers, so a build takes about a second.  It is cached under
``$PLIF_CACHE_DIR`` (default ``~/.cache/plif``) in a folder named by a hash of the sources, the
compiler command and the compiler's version, and written atomically, so concurrent processes and
edited sources never see a half-written or stale library.  Any failure (no compiler, no OpenMP,
read-only cache) leaves :func:`load_library` returning ``None`` and the caller falls back to the
PyTorch backward; the reason is kept in :data:`BUILD_ERROR`.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import threading
from pathlib import Path

from ..atomic import atomic_path

__all__ = ["load_library", "BUILD_ERROR", "cache_dir"]

SOURCES = tuple(Path(__file__).with_name(name) for name in ("cpu_neuron.cpp", "cpu_pool.cpp"))
# -ffp-contract=off keeps H_t bit-identical to the PyTorch reference (no fused multiply-add)
FLAGS = ["-O3", "-std=c++17", "-fPIC", "-shared", "-fopenmp", "-ffp-contract=off", "-fno-math-errno"]

BUILD_ERROR: str | None = None
_lib: ctypes.CDLL | None = None
_tried = False
_lock = threading.Lock()

_P = ctypes.c_void_p
_I64 = ctypes.c_int64
_INT = ctypes.c_int
_D = ctypes.c_double
_FORWARD_ARGS = [_P] * 6 + [_I64, _I64, _I64, _INT, _INT, _INT, _D, _D, _INT]
_BACKWARD_ARGS = [_P] * 8 + [_I64, _I64] + [_INT] * 6 + [_D] * 4 + [_INT]
_POOL_ARGS = [_P] * 3 + [_I64, _I64, _I64, _INT, _I64, _INT]  # (in, out, offsets/∂x, planes, H, W, k, s, threads)


def cache_dir() -> Path:
    return Path(os.environ.get("PLIF_CACHE_DIR", Path.home() / ".cache" / "plif")) / "kernels"


def _compiler() -> str | None:
    return os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")


def _build(cxx: str) -> Path:
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout
    text = b"".join(src.read_bytes() for src in SOURCES)
    key = hashlib.sha256(text + " ".join([cxx, *FLAGS, version]).encode()).hexdigest()[:16]
    target = cache_dir() / key / "libplif_cpu_neuron.so"
    if target.exists():
        return target
    with atomic_path(target) as tmp:
        proc = subprocess.run([cxx, *FLAGS, *map(str, SOURCES), "-o", str(tmp)], capture_output=True, text=True,
                              timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"{cxx} failed on {', '.join(map(str, SOURCES))}:\n{proc.stderr[-2000:]}")
    return target


def load_library() -> ctypes.CDLL | None:
    """The compiled library (building it on first use), or ``None`` if it cannot be had."""
    global _lib, _tried, BUILD_ERROR
    with _lock:
        if _tried:
            return _lib
        _tried = True
        cxx = _compiler()
        try:
            if cxx is None:
                raise RuntimeError("no C++ compiler found (set CXX or install g++)")
            missing = [str(src) for src in SOURCES if not src.exists()]
            if missing:
                raise RuntimeError(f"kernel source missing: {', '.join(missing)}")
            lib = ctypes.CDLL(str(_build(cxx)))
            for dtype in ("f32", "f64"):
                getattr(lib, f"plif_forward_{dtype}").argtypes = _FORWARD_ARGS
                getattr(lib, f"plif_backward_{dtype}").argtypes = _BACKWARD_ARGS
                getattr(lib, f"plif_max_pool_forward_{dtype}").argtypes = _POOL_ARGS
                getattr(lib, f"plif_max_pool_backward_{dtype}").argtypes = _POOL_ARGS
            _lib = lib
        except (OSError, RuntimeError, subprocess.SubprocessError) as e:
            BUILD_ERROR = str(e)
        return _lib
