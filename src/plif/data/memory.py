"""How much host memory a new array may take, and the one check every array sized by user input
(frames ``[T, 2, H, W]``, an IDX payload, a cache chunk) passes before numpy is asked for it."""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["host_memory_available", "check_fits_memory", "format_bytes", "MemoryBudgetError"]


ALWAYS_FITS = 64 << 20  # bytes: smaller arrays are not worth asking the kernel about


class MemoryBudgetError(ValueError):
    """An array larger than the memory available; the message names its size and what sets it."""


def _cgroup_room() -> int | None:
    """Bytes left under this process's cgroup v2 memory limit, or None without one."""
    try:
        rel = next(line.split("::", 1)[1].strip() for line in Path("/proc/self/cgroup").read_text().splitlines()
                   if line.startswith("0::"))
        base = Path("/sys/fs/cgroup") / rel.lstrip("/")
        limit = (base / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return int(limit) - int((base / "memory.current").read_text())
    except (OSError, StopIteration, ValueError):
        return None


def host_memory_available() -> int:
    """Bytes the host can give a new allocation: ``MemAvailable`` (or free pages), and no more than
    what is left under a cgroup memory limit."""
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    if avail is None:
        avail = int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    room = _cgroup_room()
    return max(0, min(avail, room)) if room is not None else avail


def format_bytes(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # unreachable


def check_fits_memory(nbytes: int, what: str, hint: str, available: int | None = None) -> None:
    """Refuse (:class:`MemoryBudgetError`) an allocation of ``nbytes`` larger than the memory
    available.  ``what`` names the array (with its shape), ``hint`` the option or file that sets it."""
    if available is None and nbytes <= ALWAYS_FITS:
        return  # per-sample frames of a cache build: no /proc reads for each of 60,000 samples
    avail = host_memory_available() if available is None else available
    if nbytes > avail:
        raise MemoryBudgetError(f"{what} needs {format_bytes(nbytes)}, more than the {format_bytes(avail)} of "
                                f"memory available; {hint}")
