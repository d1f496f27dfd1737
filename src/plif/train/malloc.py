"""Keep freed memory in the process during training instead of handing it back to the kernel.

A training step allocates and frees the same large tensors every step.  With glibc's defaults a
freed block above the (dynamic, at most 32 MB) mmap threshold is unmapped, and free space above
the trim threshold at the top of the heap is returned, so the next step faults every page of it
back in, zero-filled by the kernel: 10,000-16,000 minor faults and 20-40 ms of system time in a
130 ms step of the cpu preset on this 2-core AMD EPYC (torch 2.13.0+cpu, one thread).  Fixing the
mmap threshold at glibc's ceiling (32 MB) and never trimming (``mallopt``) keeps the heap at the
step's peak and reuses it: about one fault per step after the first.  Blocks above that ceiling
(the paper network's FC2048 weight gradient, 2048 x 6272 fp32 = 51 MB; the DVS networks at large
batches) would still be mapped per allocation, so mapping is turned off altogether
(``M_MMAP_MAX = 0``): every block comes from the heap and is reused.  Measured on the 2-core
Intel Xeon (torch 2.13.0+cpu, one thread, the paper network's bf16 step, B16 T8): the two casts of
that 51 MB gradient and weight 29.7 -> 19.2 ms, the step's CPU time 248 -> 231 ms.  The cost is
that the process's resident memory stays at its peak until it exits, which a training process
reaches again every step anyway.

Only glibc has these knobs; elsewhere :func:`keep_freed_memory` does nothing.  ``plif train``
calls it when an epoch starts on the CPU; ``plif bench train`` too, so it times the same step.
(``plif bench memory`` does not: its workers choose the allocator settings they measure.)
"""
from __future__ import annotations

import ctypes
import ctypes.util
import sys

__all__ = ["keep_freed_memory"]

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_MMAP_MAX = -1, -3, -4  # glibc's mallopt parameter numbers (malloc.h)
_MMAP_THRESHOLD_MAX = 32 * 2**20  # glibc's ceiling on 64-bit: larger blocks are always mapped
_done: bool | None = None


def keep_freed_memory() -> bool:
    """Stop glibc from unmapping and trimming freed memory (once per process); ``True`` if it took."""
    global _done
    if _done is None:
        _done = False
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                if hasattr(libc, "gnu_get_libc_version"):  # glibc, not musl (whose mallopt ignores these)
                    _done = (bool(libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
                             & bool(libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX))
                             & bool(libc.mallopt(_M_MMAP_MAX, 0)))
            except OSError:
                pass
    return _done
