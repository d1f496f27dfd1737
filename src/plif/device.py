"""Which device to run on, and how much memory it has free: the one place for both."""
from __future__ import annotations


__all__ = ["pick_device", "free_memory"]


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


def free_memory(device) -> int:
    """Bytes free on ``device``: CUDA's free memory, or what the host can give a new allocation
    (``MemAvailable``, within a cgroup limit: :func:`plif.data.memory.host_memory_available`)."""
    import torch

    from .data.memory import host_memory_available

    device = torch.device(device)
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    return host_memory_available()
