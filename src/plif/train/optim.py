"""The paper's optimiser, Adam without weight decay: fused where torch has it, capturable for CUDA graphs."""
from __future__ import annotations

import torch

__all__ = ["adam", "graph_adam", "fused_adam_supported"]


def fused_adam_supported(device_type: str, version: str | None = None) -> bool:
    """Fused Adam exists for CUDA since torch 2.0 and for the CPU only since 2.4."""
    version = version or torch.__version__
    major, minor = (int(v) for v in version.split("+")[0].split(".")[:2])
    return (major, minor) >= ((2, 4) if device_type == "cpu" else (2, 0))


def adam(params, lr: float, capturable: bool = False) -> torch.optim.Adam:
    """The paper's optimiser (Adam, no weight decay) in its fused form: one kernel over all
    parameters instead of ~10 ops per tensor, which is a tenth of a CPU step on the paper's network.
    Where this torch has no fused Adam for the parameters' device, the multi-tensor form is used."""
    params = list(params)
    device_type = params[0].device.type if params else "cpu"
    if fused_adam_supported(device_type):
        return torch.optim.Adam(params, lr=lr, fused=True, capturable=capturable)
    return torch.optim.Adam(params, lr=lr, foreach=True, capturable=capturable)


def graph_adam(params, lr: float, device: torch.device) -> torch.optim.Adam:
    """``--cuda-graph``'s Adam: fused, with the learning rate in a device tensor (the cosine
    schedule fills it between epochs, so a captured step never changes), capturable on CUDA."""
    return torch.optim.Adam(params, lr=torch.tensor(float(lr), device=device), fused=True,
                            capturable=device.type == "cuda")
