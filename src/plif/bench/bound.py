"""How fast a training step could be on a GPU: its FLOPs against the tensor cores' dense peak, its
activation bytes against HBM bandwidth, and the larger of the two as the step's bound.

Counted from the network, not measured: every convolution and FC layer's multiply-adds (2 FLOPs
each) over ``T·B`` samples (``B`` for a first convolution a static input runs once, before the
repeat over T), and forward + backward as 3× forward (the input gradient and the weight gradient
each cost one forward).  Activation bytes: every layer's output written and read once in forward,
and its gradient written and read once in backward (4 × its elements), at the step's activation
width (4 bytes in fp32, 2 under bf16 autocast); weights, the input and the recomputations of the
memory modes are left out, so both numbers are lower bounds and "% of bound" is an upper bound on
how much of the GPU a step uses.

Peaks: the vendors' published dense numbers (tensor-core figures are quoted "with sparsity" in
the datasheets; dense is half), keyed by ``torch.cuda.get_device_name()``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Peaks", "PEAKS", "peaks_for", "step_flops", "activation_bytes", "step_bound_ms"]


@dataclass(frozen=True)
class Peaks:
    """Dense throughput in TFLOP/s (fp32 without tensor cores, TF32 and bf16 tensor cores) and HBM TB/s."""

    fp32: float
    tf32: float
    bf16: float
    hbm_tb_s: float


# (name fragment, peaks); the first fragment found in the device name wins, so specific names come first.
# NVIDIA H100 Tensor Core GPU datasheet (SXM5 / PCIe / NVL): TF32 989 / 756 / 835 and BF16 1,979 / 1,513 / 1,671
# TFLOPS with sparsity, FP32 67 / 51 / 60, HBM 3.35 / 2.0 / 3.9 TB/s.  NVIDIA H200 Tensor Core GPU datasheet
# (SXM / NVL): TF32 989 / 835, BF16 1,979 / 1,671 with sparsity, FP32 67 / 60, HBM3e 4.8 TB/s.  NVIDIA A100
# Tensor Core GPU datasheet: TF32 156 and BF16 312 dense, FP32 19.5; HBM2 1,555 GB/s (40GB), HBM2e 2,039 GB/s
# (80GB SXM) and 1,935 GB/s (80GB PCIe).
PEAKS: tuple[tuple[str, Peaks], ...] = (
    ("H200 NVL", Peaks(60.0, 417.5, 835.5, 4.8)),
    ("H200", Peaks(67.0, 494.5, 989.5, 4.8)),
    ("H100 NVL", Peaks(60.0, 417.5, 835.5, 3.9)),
    ("H100 PCIe", Peaks(51.0, 378.0, 756.5, 2.0)),
    ("H100", Peaks(67.0, 494.5, 989.5, 3.35)),  # SXM5: "NVIDIA H100 80GB HBM3"
    ("A100 80GB PCIe", Peaks(19.5, 156.0, 312.0, 1.935)),
    ("A100-SXM4-80GB", Peaks(19.5, 156.0, 312.0, 2.039)),
    ("A100", Peaks(19.5, 156.0, 312.0, 1.555)),  # 40GB, SXM4 or PCIe
)


def peaks_for(device_name: str) -> Peaks | None:
    """The peaks of the GPU ``torch.cuda.get_device_name()`` names, or None when it is not in :data:`PEAKS`."""
    return next((p for fragment, p in PEAKS if fragment in device_name), None)


def _layers(net):
    """``(index, module, per-sample output shape)`` of each layer of ``net``."""
    from ..layers import unwrap

    for i, (layer, info) in enumerate(zip(net.layers, net.info)):
        yield i, unwrap(layer), info.out_shape


def step_flops(net, batch: int, static_input: bool) -> float:
    """FLOPs of one training step (forward + backward) of ``net`` (a :class:`~plif.models.SpikingNetwork`)
    on ``batch`` samples: conv and FC multiply-adds only, as :func:`plif.deploy.stats.ann_macs` counts them."""
    from ..deploy.stats import ann_macs
    from ..models.structure import hoists_first_layer  # a static input's first layer runs once

    macs = 0
    for i, m, out in _layers(net):
        runs_once = static_input and i == 0 and hoists_first_layer(net.layers)
        macs += ann_macs(m, out) * batch * (1 if runs_once else net.T)
    return 3 * 2 * macs


def activation_bytes(net, batch: int, bytes_per_element: int) -> float:
    """Bytes of activations one training step moves at least (see the module docstring); a flatten
    is a view and moves none."""
    from torch import nn

    elements = sum(math.prod(out) for _, m, out in _layers(net) if not isinstance(m, nn.Flatten))
    return 4 * bytes_per_element * batch * net.T * elements


def step_bound_ms(flops: float, nbytes: float, peaks: Peaks | None, precision: str) -> float | None:
    """The step's bound in ms: the larger of its FLOPs at the ``precision`` peak (``fp32``, ``tf32``,
    ``bf16``) and its bytes at HBM bandwidth; None without peaks."""
    if peaks is None:
        return None
    return max(flops / (getattr(peaks, precision) * 1e12), nbytes / (peaks.hbm_tb_s * 1e12)) * 1e3
