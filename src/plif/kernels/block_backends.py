"""Where each implementation of the fused block lives: one table, read by the block's autograd step
(:mod:`plif.layers.fused_block`, which imports a module on first use) and by its check
(:mod:`.block_check`).  Names only: nothing is imported here.

Each entry names, in its module, the three functions with :mod:`.block_reference`'s signatures
(``forward``, ``backward``, ``input_grad``), the predicate ``supports(device, dtype) -> bool`` (whether
the kernels take a ``y`` of that device and dtype), the optional faster paths
(:class:`plif.layers.fused_block.BlockKernels` says what each does) and ``unavailable() -> str | None``
(why the module cannot run here: a failed build).  The neuron kernels' table is
:data:`plif.neurons.dispatch.FUSED`; both are loaded by :func:`plif.neurons.dispatch.load_kernel_module`.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BlockBackend", "BLOCK_BACKENDS"]


@dataclass(frozen=True)
class BlockBackend:
    """``module`` and the names of its functions; ``device``: the device type ``auto`` picks it for;
    ``reads_repeated``: forward and backward read a ``y`` repeated over time as a stride-0 view."""

    module: str
    device: str
    forward: str
    backward: str
    input_grad: str
    supports: str
    input_grad_into: str | None = None
    stats: str | None = None
    backward_into: str | None = None
    backward_summed: str | None = None
    reads_repeated: bool = False
    unavailable: str | None = None


BLOCK_BACKENDS: dict[str, BlockBackend] = {
    "cpu": BlockBackend("plif.kernels.cpu_block", "cpu", "block_forward_cpu", "block_backward_cpu",
                        "bn_input_grad_cpu", "cpu_block_supports", input_grad_into="bn_input_grad_cpu_",
                        stats="batch_stats_cpu", backward_into="block_backward_cpu_",
                        backward_summed="block_backward_summed_cpu", reads_repeated=True,
                        unavailable="unavailable"),
    "triton": BlockBackend("plif.kernels.triton_block", "cuda", "block_forward_triton", "block_backward_triton",
                           "bn_input_grad_triton", "block_triton_supports", stats="block_stats_triton"),
}
