"""The paper's block after a convolution, BatchNorm → IF/LIF/PLIF → [2×2 spike max-pool], as one fused step.

``conv`` stays its own operation; after it, one kernel (:mod:`plif.kernels.block_reference` states
what it computes) normalises with BatchNorm's statistics as a per-channel affine
``z = y·scale + shift``, runs the neuron over all T steps and pools the spikes, writing only the
(pooled) spikes and, with the pool, one byte per output saying which element of its window won.
Backward recomputes the neuron from the convolution's output ``y`` and returns ``∂y``, BatchNorm's
``∂γ = invstd·Σ∂z(y−μ)`` and ``∂β = Σ∂z``, and ``∂k`` (which autograd turns into PLIF's ``∂w`` through
``k = sigmoid(w)``).  Nothing the size of ``y`` is kept but ``y`` itself: not BatchNorm's output, the
neuron's potentials, its spikes in fp32, nor int64 pool indices; with ``recompute`` not even ``y``,
which backward makes again from the convolution's input (one byte per element when that is spikes).
A first convolution with few taps on the CPU (event input: ``in_channels·k·k ≤ 32``) is always made
again in backward: its output is the largest tensor of the step and costs little to recompute (DVS128
Gesture T = 20, B = 2: the step's live peak 1,091 -> 876 MB, its time 1.01 -> 1.14 s).

Training mode takes BatchNorm's batch statistics over ``T·B·H·W`` per channel on the device (no
host synchronisation) and updates ``running_mean``, ``running_var`` (unbiased) and
``num_batches_tracked`` as ``nn.BatchNorm2d`` does; evaluation uses the running statistics.

Which kernels run is chosen by the tensor's device and the neuron's ``backend``: on the CPU the
compiled :mod:`plif.kernels.cpu_block`, on CUDA :mod:`plif.kernels.triton_block`, and
:mod:`plif.kernels.block_reference` (plain PyTorch) for ``backend="reference"`` or ``"bptt"``.  A
kernel module that fails to load leaves the reference in its place, with one warning saying why.
A neuron that is not exactly IF, LIF or PLIF, a neuron backend registered by a user, a surrogate
the kernels do not have in closed form, or a dtype the device's kernels do not take (fp64 on CUDA,
fp16 on the CPU) runs the composed layers instead.

Exactness: for the same ``scale`` and ``shift`` the kernels' spikes are the reference's bit for bit.
Against ``nn.BatchNorm2d`` followed by the neuron, ``z`` may differ in its last bit (PyTorch's CPU
BatchNorm rounds its normalisation otherwise: a third of the values of a ``[40, 128, 16, 16]`` test
differ from ``y·scale + shift`` by one unit in the last place), so a potential within rounding of the
threshold can fire differently; the statistics and gradients agree to rounding.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from .. import kernel_table
from ..kernel_table import load_ahead
from ..kernels.block_reference import block_backward_reference, block_forward_reference, bn_input_grad
from ..kernels.self_check import passes as self_check_passes
from ..neurons import IF, LIF, PLIF, SpikingNeuron
from ..neurons.functional import NeuronConfig, state_dtype
from ..surrogate import get_surrogate
from .hooks import hook_kind
from .repeated import repeated_input
from .pool_rule import max_pool_rule
from .few_tap_conv import few_tap_conv2d, few_tap_conv_backward, few_taps
from .spike_input import SpikeConv2d, autocast_dtype, autocast_inputs, conv_backward, pack_spikes, unpack_spikes, conv_args, conv_refusal

__all__ = ["BlockKernels", "block_kernels", "load_kernels", "FusedBlock", "fused_block",
           "batch_statistics", "record_statistics", "bn_affine", "BlockConv", "fusable_pool", "fusable_now", "Route",
           "fused_route"]


@dataclass(frozen=True)
class BlockKernels:
    """One implementation of the block: the reference's three functions (``forward``, ``backward``,
    ``input_grad``), ``input_grad_into`` (``input_grad`` written over ``∂z``, or None), ``stats``
    (``y -> (mean, biased variance)`` per channel, float64 or the state dtype), ``backward_into``
    (``backward`` and ``input_grad`` in one, ``∂y`` written over a contiguous ``y``: ``backward``'s
    arguments, then ``invstd, training``; or None), ``backward_summed`` (``backward`` with
    ``Σ_t ∂z [1, B, C, H, W]`` in place of ``∂z``, for a ``y`` repeated over time; or None),
    ``reads_repeated`` (``forward`` and ``backward`` take such a ``y`` as a stride-0 view) and
    ``supports(device, dtype)`` (whether they take a ``y`` of that device and dtype)."""

    name: str
    forward: Callable
    backward: Callable
    input_grad: Callable
    input_grad_into: Callable | None
    stats: Callable
    backward_into: Callable | None = None
    backward_summed: Callable | None = None
    reads_repeated: bool = True
    supports: Callable = lambda device, dtype: True


def _torch_stats(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """BatchNorm's batch statistics with PyTorch ops (on ``y``'s device), widened to float64."""
    var, mean = torch.var_mean(y.to(state_dtype(y.dtype)), dim=(0, 1, 3, 4), correction=0)
    return mean.double(), var.double()


REFERENCE = BlockKernels("reference", block_forward_reference, block_backward_reference, bn_input_grad, None,
                         _torch_stats)

_BLOCKS: dict[str, kernel_table.Kernel] = kernel_table.KERNELS["block"]  # the table's own: name -> where it lives
_LOADED: dict[str, BlockKernels] = {}  # the table's block kernels that loaded, made BlockKernels
_WARNED: set[str] = set()
_made = False


def load_kernels() -> None:
    """Load the block kernels of :data:`plif.kernel_table.KERNELS` once (idempotent) and make those
    that loaded :class:`BlockKernels`.  A plan's fused steps call this when they are made, so that a
    ``torch.compile`` trace never has to import anything; a module that fails keeps its reason in the
    table, said once where a block needs it (:func:`block_kernels`)."""
    global _made
    if _made:
        return
    _made = True
    for name, entry in _BLOCKS.items():
        f = kernel_table.functions("block", name)
        if f is not None:
            _LOADED[name] = BlockKernels(name, f["forward"], f["backward"], f["input_grad"], f["input_grad_into"],
                                         f["stats"] or _torch_stats, f["backward_into"], f["backward_summed"],
                                         entry.reads_repeated, f["supports"])


def _forget() -> None:
    global _made
    _LOADED.clear()
    _WARNED.clear()
    _made = False


kernel_table.on_reset(_forget)


def block_kernels(neuron: nn.Module, device: torch.device | str, dtype: torch.dtype) -> BlockKernels | None:
    """The kernels a block with ``neuron`` runs on a convolution output ``y`` of ``device`` and
    ``dtype``, or None when the composed layers run: a neuron other than IF, LIF and PLIF, a backend
    registered outside plif, a surrogate the kernels lack (unless the neuron's backend is one of the
    PyTorch paths), or a ``y`` the kernels do not take (fp64 on CUDA, fp16 on the CPU).  For the
    last, the composed layers rather than the reference: the neuron runs its own fastest backend
    for that dtype and nothing is computed twice, where the reference replays every step in
    backward (it is there to be the spec).  Where the device's kernel module failed to load, the
    reference runs and one warning says why."""
    if type(neuron) not in (IF, LIF, PLIF):
        return None
    backend = neuron.backend
    if backend in ("reference", "bptt"):
        return REFERENCE
    if backend not in ("auto", *_BLOCKS) or not get_surrogate(neuron.cfg.surrogate).fused:
        return None
    kind = torch.device(device).type
    name = next((n for n, b in _BLOCKS.items() if b.device == kind), None) if backend == "auto" else backend
    if name is None:
        return REFERENCE
    load_kernels()
    if name in _LOADED:
        kernels = _LOADED[name]
        ok = kernels.supports(device, dtype) and self_check_passes("block", name, device, dtype)  # Triton: checked
        return kernels if ok else None
    if name not in _WARNED:
        _WARNED.add(name)
        warnings.warn(f"plif: the fused block's {name!r} kernels failed to load ({kernel_table.failure('block', name)}); the block "
                      f"runs its PyTorch reference there instead, which is several times slower",
                      RuntimeWarning, stacklevel=2)
    return REFERENCE


def conv_dtype(weight: torch.Tensor, device: torch.device) -> torch.dtype:
    """The dtype of a convolution's output on ``device``: autocast's where it is on there (autocast
    leaves fp64 as it is), else the weight's (the input's, which must match)."""
    cast = autocast_dtype(device.type)
    return cast if cast is not None and weight.dtype != torch.float64 else weight.dtype


def fusable_pool(pool: nn.Module) -> bool:
    """Whether ``pool`` (unwrapped) is the block's pooling: max over 2×2 windows every 2, no padding,
    dilation, ceil mode or indices (:func:`~plif.layers.pool_rule.max_pool_rule`)."""
    return max_pool_rule(pool).fused == ""


# ------------------------------------------------------------------------------------ statistics
def batch_statistics(y: torch.Tensor, bn: nn.BatchNorm2d, kernels: BlockKernels):
    """``(mean, invstd)`` of ``y [T, B, C, H, W]`` over ``T·B·H·W`` in the state dtype, and BatchNorm's
    running statistics updated as ``nn.BatchNorm2d`` updates them (momentum, unbiased variance, batch
    count).  No host synchronisation."""
    n = y.numel() // y.shape[2]
    if n < 2:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {list(y.shape)}")
    wide = state_dtype(y.dtype)
    with torch.no_grad():
        # a y repeated over time (a stride-0 view) has the statistics of one of its steps: kernels that
        # would copy the view (Triton) read that step; the others read the view, the same bits as a copy
        once = y.shape[0] > 1 and y.stride(0) == 0 and not kernels.reads_repeated
        mean64, var64 = kernels.stats((y[:1] if once else y).detach())
        return record_statistics(bn, mean64, var64, var64 * (n / (n - 1)), wide)


def record_statistics(bn: nn.BatchNorm2d, mean64: torch.Tensor, var64: torch.Tensor, unbiased64: torch.Tensor,
                       wide: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """BatchNorm's running statistics updated with a batch's ``mean64``, biased ``var64`` and unbiased
    ``unbiased64`` variance (fp64, each caller forms it as it has the sums), as ``nn.BatchNorm2d``
    updates them (momentum, batch count); ``(mean, invstd)`` in ``wide``.  No host synchronisation."""
    with torch.no_grad():
        m = bn.momentum
        bn.running_mean.mul_(1 - m).add_(mean64.to(bn.running_mean.dtype), alpha=m)
        bn.running_var.mul_(1 - m).add_(unbiased64.to(bn.running_var.dtype), alpha=m)
        bn.num_batches_tracked.add_(1)
        return mean64.to(wide), (var64 + bn.eps).rsqrt().to(wide)


def _running_statistics(bn: nn.BatchNorm2d, wide: torch.dtype):
    """``(mean, invstd)`` of evaluation, as BatchNorm computes them (``1/sqrt(var + eps)``)."""
    with torch.no_grad():
        return bn.running_mean.to(wide), 1 / torch.sqrt(bn.running_var.to(wide) + bn.eps)


def bn_affine(gamma, beta, mean, invstd):
    """BatchNorm as ``scale, shift`` (``scale = invstd·γ``, ``shift = β − mean·scale``, as PyTorch forms them)."""
    scale = invstd if gamma is None else invstd * gamma.to(invstd.dtype)
    shift = -mean * scale if beta is None else beta.to(invstd.dtype) - mean * scale
    return scale, shift


# ----------------------------------------------------------------------------------- autograd
# Above this size a tensor is mapped afresh at every allocation (glibc's largest mmap threshold, which
# plif.train.malloc fixes) and its first touch faults every page in: the backward writes ∂y over y
# rather than allocate ∂z, at the cost of a second sweep; below it, and where memory is not the aim
# (recompute=False), one sweep and a ∂z from the heap are faster (the cpu preset's second block: 4.5
# against 3.8 ms).  Where y is made again in backward (``--memory exact``, and a few-tap first conv on
# the CPU under the default) it always writes over y, which then is the backward's own: both are for memory.
_FRESH_BYTES = 32 * 2**20


@dataclass(frozen=True)
class BlockConv:
    """A bias-free convolution a block's backward runs again: ``args`` (:func:`conv_args`), whether its
    input is spikes (kept as one byte) and whether it has few taps (:mod:`plif.layers.few_tap_conv`)."""

    args: tuple
    binary: bool
    few: bool

    def __call__(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """``x [T, B, C, H, W]`` -> ``[T, B, C', H', W']`` (contiguous: the kernels write ``∂y`` over it, and
        a channels-last ``x`` gives a channels-last output), no autograd."""
        x4 = x.flatten(0, 1)
        y = few_tap_conv2d(x4, weight, *self.args[:2]) if self.few else F.conv2d(x4, weight, None, *self.args)
        return y.contiguous().unflatten(0, x.shape[:2])

    def grads(self, g: torch.Tensor, x_of, shape, weight: torch.Tensor, mask):
        """``(∂x, ∂weight)`` for ``g [N, C', H', W']``; ``x_of()`` makes the input ``[N, C, H, W]``."""
        if self.few:
            return few_tap_conv_backward(g, x_of(), weight, self.args[0], self.args[1], mask)
        return conv_backward(g, x_of, shape, weight, self.args, mask)


@dataclass(frozen=True)
class _Spec:
    """What a call needs besides tensors."""

    kernels: BlockKernels
    cfg: NeuronConfig
    pool: bool
    need_state: bool
    training: bool
    conv: BlockConv | None = None  # when backward recomputes y from the conv's input
    in_place: bool = False  # backward may write ∂y over y (eager: a compiled graph keeps its tensors)
    repeat: int = 0  # y is [B, C, H, W], the same at each of this many steps (a static input)


def _over_time(y: torch.Tensor, spec: _Spec) -> torch.Tensor:
    """The ``[T, B, C, H, W]`` the kernels read: ``y`` itself, or ``y`` repeated (a view where they take one)."""
    if not spec.repeat:
        return y
    full = y.unsqueeze(0).expand(spec.repeat, *y.shape)
    return full if spec.kernels.reads_repeated else full.contiguous()


class _FusedBlockFunction(torch.autograd.Function):
    """Inputs ``(y, x, weight, γ, β, k, v0, mean, invstd, spec)``; outputs ``(out, V_{T-1})``.

    Without ``spec.conv`` ``y`` is differentiable and kept; with it ``y`` is used in forward only
    and backward makes it again as ``conv(x, weight)``, returning ``∂x`` and ``∂weight`` instead."""

    @staticmethod
    def forward(ctx, y, x, weight, gamma, beta, k, v0, mean, invstd, spec):
        scale, shift = bn_affine(gamma, beta, mean, invstd)
        out, place, v_last = spec.kernels.forward(_over_time(y, spec), scale, shift, k, v0, spec.cfg, spec.pool,
                                                  spec.need_state)
        if spec.conv is None:
            ctx.save_for_backward(y, gamma, mean, invstd, scale, shift, k, v0, place)
        else:
            ctx.save_for_backward(pack_spikes(x) if spec.conv.binary else x, weight, gamma, mean, invstd, scale, shift, k, v0, place)
            ctx.x_dtype = x.dtype
        ctx.spec, ctx.beta_dtype = spec, None if beta is None else beta.dtype
        ctx.set_materialize_grads(False)
        ctx.mark_non_differentiable(place)
        return out, v_last, place

    @staticmethod
    def backward(ctx, g_out, g_v_last, _g_place):
        spec = ctx.spec
        need = ctx.needs_input_grad
        if g_out is None and g_v_last is None:
            return (None,) * 10  # only the pool's places reached the loss: they have no gradient
        if spec.conv is None:
            y, gamma, mean, invstd, scale, shift, k, v0, place = ctx.saved_tensors
        else:
            saved, weight, gamma, mean, invstd, scale, shift, k, v0, place = ctx.saved_tensors
            x_of = (lambda: unpack_spikes(saved, None, ctx.x_dtype)) if spec.conv.binary else (lambda: saved)
            y = spec.conv(x_of(), weight)  # recomputed, not kept
        if g_out is None:
            shape = (spec.repeat, *y.shape) if spec.repeat else y.shape  # what the kernels read, [T, B, C, H, W]
            g_out = y.new_zeros(place.shape if spec.pool else shape)
        block = (scale, shift, mean, k, v0, spec.cfg, spec.pool, place, g_out, g_v_last, bool(need[5] and spec.cfg.leak))
        into = spec.kernels.backward_into
        if spec.repeat:  # the gradient of a y repeated over time: the sum over time of ∂y, which is ∂y of Σ_t ∂z
            summed = spec.kernels.backward_summed
            if summed is not None:
                g_z, g_v0, g_k, sum_g, sum_gc = summed(_over_time(y, spec), *block)
            else:
                g_z, g_v0, g_k, sum_g, sum_gc = spec.kernels.backward(_over_time(y, spec), *block)
                g_z = g_z.sum(0, keepdim=True)
            # Σ_t ∂z has n/T values per channel, so bn_input_grad's means come out T times larger, as the sum needs
            grad = spec.kernels.input_grad_into or spec.kernels.input_grad
            g_y = grad(g_z, y.unsqueeze(0), mean, invstd, scale, sum_g, sum_gc, spec.training)[0]
            del g_z
        elif (into is not None and spec.in_place and y.is_contiguous() and not torch.is_grad_enabled()
              and (spec.conv is not None or y.numel() * y.element_size() >= _FRESH_BYTES)):
            # y is the conv's output, which nothing else reads: ∂y takes its place, so backward allocates
            # nothing of its size (the op bumps y's version: a second backward through this graph is refused)
            g_y, g_v0, g_k, sum_g, sum_gc = into(y, *block, invstd, spec.training)
        else:
            g_z, g_v0, g_k, sum_g, sum_gc = spec.kernels.backward(y, *block)
            grad = spec.kernels.input_grad_into or spec.kernels.input_grad
            g_y = grad(g_z, y, mean, invstd, scale, sum_g, sum_gc, spec.training)
            del g_z
        del y
        g_gamma = (invstd * sum_gc).to(gamma.dtype) if need[3] else None
        g_beta = sum_g.to(ctx.beta_dtype) if need[4] else None
        g_k = g_k if need[5] and spec.cfg.leak else None
        g_v0 = g_v0 if need[6] else None
        g_x = g_w = None
        if spec.conv is not None:
            g_flat = g_y.flatten(0, 1)
            g_x, g_w = spec.conv.grads(g_flat, lambda: x_of().flatten(0, 1), (saved.shape[0] * saved.shape[1],
                                       *saved.shape[2:]), weight, need[1:3])
            g_x = None if g_x is None else g_x.unflatten(0, saved.shape[:2])
            g_y = None
        return g_y if need[0] else None, g_x, g_w, g_gamma, g_beta, g_k, g_v0, None, None, None


def fused_block(y: torch.Tensor, bn: nn.BatchNorm2d, neuron: SpikingNeuron, pool: bool, kernels: BlockKernels,
                v0: torch.Tensor | None = None, need_state: bool = False, conv: tuple | None = None,
                repeat: int = 0):
    """BatchNorm (``bn``'s mode), ``neuron`` and the optional pool on ``y [T, B, C, H, W]``:
    ``(out [T, B, C, H', W'], V_{T-1} [B, C, H, W] or an empty tensor)``.

    - v0: the neuron's starting potential (None: rest); need_state: return ``V_{T-1}``.
    - conv: ``(x, weight, conv)``: ``y = conv(x)`` (a ``BlockConv``) is not kept, backward recomputes it.
    - repeat: ``y`` is ``[B, C, H, W]``, the same at each of ``repeat`` steps (a static input's hoisted
      convolution): read in place, and its gradient summed over time as the kernel goes.
    """
    wide = state_dtype(y.dtype)
    full = y.unsqueeze(0).expand(repeat, *y.shape) if repeat else y
    if bn.training:
        mean, invstd = batch_statistics(full, bn, kernels)
    else:
        mean, invstd = _running_statistics(bn, wide)
    k = neuron.k(full).reshape(-1)
    spec = _Spec(kernels, neuron.cfg, bool(pool), bool(need_state), bool(bn.training),
                 None if conv is None else conv[2], not torch.compiler.is_compiling(), int(repeat))
    x, weight = (None, None) if conv is None else conv[:2]
    out, v_last, _ = _FusedBlockFunction.apply(y, x, weight, bn.weight, bn.bias, k, v0, mean, invstd, spec)
    return out, v_last


def fusable_now(layers: list[nn.Module], bn: nn.BatchNorm2d) -> bool:
    """Whether a block of ``layers`` (conv, BatchNorm ``bn``, neuron [, pool]) may run fused now:
    ``bn`` in training mode with a momentum and running statistics (evaluation runs the composed
    layers, bit for bit what stepping a network and the exporters compute), and no forward or
    backward hook on any of the layers or the module a ``TimeFolded`` wraps
    (:func:`~plif.layers.hooks.hook_kind`: a hook sees what the composed layers compute)."""
    return (bn.training and bn.momentum is not None and bn.track_running_stats  # the flags first: cheap
            and not hook_kind(m for layer in layers for m in layer.modules()))


@dataclass(frozen=True)
class Route:
    """How the fused path runs a block on one input: its ``kernels``, and ``few``: the convolution
    runs as :mod:`plif.layers.few_tap_conv`'s (few taps, the CPU)."""

    kernels: BlockKernels
    few: bool


def fused_route(layers: list[nn.Module], x: torch.Tensor, start: int = 0) -> Route | None:
    """The one place that says what the fused path takes: the :class:`Route` by which a block of
    ``layers`` (``TimeFolded`` conv, ``TimeFolded`` BatchNorm2d, IF/LIF/PLIF [, ``TimeFolded`` 2×2
    max-pool]) runs fused on ``x [T, B, C, H, W]``, or None where the composed layers run instead.
    ``start``: the layers before it already ran (1: ``x`` is the convolution's output).

    The fused path takes: a strided (dense, any strides: transposed, sliced, channels-last,
    expanded over time) non-empty 5-d ``x``; BatchNorm as :func:`fusable_now` takes it (training,
    running statistics, a momentum, no hooks); where the block runs its convolution (``start`` 0),
    one that ``F.conv2d`` computes with :func:`~plif.layers.spike_input.conv_args` (zero padding,
    no bias, a plain ``nn.Conv2d``: :func:`~plif.layers.spike_input.conv_refusal`; any stride,
    padding, dilation and groups) on an ``x`` of its weight's dtype (or under autocast); and kernels
    for the neuron, ``x``'s device and the convolution's output dtype (:func:`block_kernels`; the
    PyTorch reference not inside a ``torch.compile`` trace).  Everything else runs the composed
    layers, whose result the fused path's is held to (tests/layers/test_fused_layouts.py)."""
    if start > 1 or x.dim() != 5 or x.layout != torch.strided or x.numel() == 0:
        return None
    conv, bn = layers[0].layer, layers[1].layer
    if not fusable_now(layers, bn):  # before the kernels' look-up: eval asks no more
        return None
    if start:
        dtype = x.dtype
    else:
        if conv_refusal(conv) is not None:
            return None
        dtype = conv_dtype(conv.weight, x.device)
        if x.dtype != conv.weight.dtype and not torch.is_autocast_enabled(x.device.type):
            return None  # the composed convolution says what is wrong
    kernels = block_kernels(layers[2], x.device, dtype)
    # the reference's backward calls autograd itself, which torch.compile does not trace: compiled,
    # the composed layers run the same PyTorch computation
    if kernels is None or (kernels is REFERENCE and torch.compiler.is_compiling()):
        return None
    return Route(kernels, start == 0 and few_taps(conv, x))


def _repeated(x: torch.Tensor) -> torch.Tensor | None:
    """The ``[B, ...]`` tensor that ``x [T, B, ...]`` repeats over time (a static input after the
    network's hoisted layers: :func:`~plif.layers.repeated.repeated_input`), else None.  Eager only:
    a compiled graph makes its own views."""
    return None if torch.compiler.is_compiling() or x.shape[0] < 2 else repeated_input(x)


# ------------------------------------------------------------------------------------ plan step
class FusedBlock:
    """A plan step (:mod:`plif.models.memory`): ``conv`` (``TimeFolded`` Conv2d, no bias), ``bn``
    (``TimeFolded`` BatchNorm2d), a neuron and an optional ``TimeFolded`` 2×2 max-pool over
    ``[T, B, ...]``, the last three fused in training.

    ``conv_step`` runs the convolution (the plan's saving layer for it: one-byte spikes kept);
    ``recompute``: backward makes the convolution's output again from its input instead of keeping
    it (``binary``: that input is spikes, kept as one byte).  ``fallback(x, start)`` runs the
    composed layers, for what the kernels do not take.  Not an ``nn.Module``: it holds layers the
    network owns, as the other steps of a plan do."""

    def __init__(self, layers: list[nn.Module], conv_step, fallback, recompute: bool = False, binary: bool = False):
        self.layers = layers
        self.conv, self.bn, self.neuron = layers[0].layer, layers[1].layer, layers[2]
        self.pool = len(layers) > 3
        self.conv_step, self._plain = conv_step, fallback
        self.recompute, self.binary = bool(recompute), bool(binary)
        self._all_modules = tuple(m for layer in layers for m in layer.modules())
        load_ahead(load_kernels)  # now, never inside a torch.compile trace

    def __call__(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """``start``: the layers before it already ran (1: ``x`` is the convolution's output, a static
        input's hoisted encoder)."""
        route = fused_route(self.layers, x, start)
        if route is None:
            if hook_kind(self._all_modules):  # the hooks see the layers as written (the composed plan skips modules)
                for m in self.layers[start:]:
                    x = m(x)
                return x
            return self._plain(x, start)
        kernels, few = route.kernels, route.few
        # a few-tap conv runs here, not as conv_step, unless that is the spike input's own convolution
        here = few and not (self.binary and isinstance(self.conv_step, SpikeConv2d))
        # a few-tap first conv (the CPU, event input) is cheap to make again and its output the step's largest:
        # made again in backward also where it is in eval mode under a training BatchNorm
        if torch.is_grad_enabled() and (start == 0 and (self.recompute or few) and self.conv.training or here):
            xc, weight = autocast_inputs(x, self.conv.weight)
            conv = BlockConv(tuple(conv_args(self.conv)), self.binary, few)
            with torch.no_grad():
                y = conv(xc, weight)
            return fused_block(y, self.bn, self.neuron, self.pool, kernels, conv=(xc, weight, conv))[0]
        if start == 1 and (base := _repeated(x)) is not None:
            return fused_block(base, self.bn, self.neuron, self.pool, kernels, repeat=x.shape[0])[0]
        if start == 1:
            y = x
        elif here:  # without gradients
            xc, weight = autocast_inputs(x, self.conv.weight)
            y = few_tap_conv2d(xc.flatten(0, 1), weight, self.conv.stride, self.conv.padding).unflatten(0, x.shape[:2])
        else:
            y = self.conv_step(x)
        return fused_block(y, self.bn, self.neuron, self.pool, kernels)[0]

    def __repr__(self) -> str:
        return f"FusedBlock({', '.join(type(m).__name__ for m in self.layers)})"
