"""Which device to run on, how much memory it has free, and whether its fp32 products use TF32: the
one place for each.

The ground floor: :mod:`plif.data.memory` (the check every user-sized array passes) reads the
host's free memory from here, so nothing here imports the data package (nor torch, until a
function needs it)."""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["pick_device", "free_memory", "host_memory_available", "set_tf32", "TORCH_TF32"]


def pick_device(name: str | None = "auto", check: bool = True):
    """The one place "auto" is decided: ``cuda`` when available, else ``cpu``.

    check: also refuse a CUDA device on a machine without CUDA.  A malformed name raises
    ``ValueError`` naming ``--device``.
    """
    import torch

    if name in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError):
        raise ValueError(f"--device {name!r}: not a device; use auto, cpu, cuda or cuda:N") from None
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"--device {name!r}: plif runs on cpu or cuda only; use auto, cpu, cuda or cuda:N")
    if check and dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {name}: CUDA is not available on this machine; use --device cpu")
    return dev


TORCH_TF32 = (False, True)
"""torch's own TF32 flags ``(matmul, cuDNN)``: fp32 matmuls, TF32 convolutions (what runs made
before ``plif train``'s ``tf32`` setting ran with)."""


def set_tf32(enabled: bool | None | tuple[bool, bool]) -> tuple[bool, bool]:
    """TF32 tensor cores for fp32 matmuls and cuDNN convolutions on CUDA (True), neither (False) or
    torch's defaults (None: :data:`TORCH_TF32`): the one place plif sets torch's two process-wide
    flags (``plif train``'s ``tf32`` field, ``plif eval`` and the benchmarks from it).  A pair
    ``(matmul, cuDNN)`` sets each.  No effect on the CPU.  Returns the pair as it was, which a
    caller gives back to restore both.

    On an H200 the Fashion-MNIST paper step in the CUDA graph took 0.90 / 0.86 of its fp32 time at
    batch 16 / 128, and the paper protocol tracked the fp32 run within noise at each of 46 epochs
    (``docs/gpu/h200-2026-11-27/``)."""
    import torch

    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    matmul, cudnn = TORCH_TF32 if enabled is None else enabled if isinstance(enabled, tuple) else (enabled, enabled)
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = bool(matmul), bool(cudnn)
    return before


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


def free_memory(device) -> int:
    """Bytes free on ``device``: CUDA's free memory, or what the host can give a new allocation
    (:func:`host_memory_available`: ``MemAvailable``, within a cgroup limit)."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    return host_memory_available()
