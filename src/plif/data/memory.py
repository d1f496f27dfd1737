"""The one check every array sized by user input (frames ``[T, 2, H, W]``, an IDX payload, a cache
chunk) passes before numpy is asked for it; the host's free memory comes from :mod:`plif.device`."""
from __future__ import annotations

from ..device import host_memory_available

__all__ = ["check_fits_memory", "format_bytes", "MemoryBudgetError"]


ALWAYS_FITS = 64 << 20  # bytes: smaller arrays are not worth asking the kernel about


class MemoryBudgetError(ValueError):
    """An array larger than the memory available; the message names its size and what sets it."""


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
