"""Memory savings for training: how a :class:`SpikingNetwork`'s layers are run, not what they are.

The network's layer list (and so its state dict, layer table and exporters) never changes; a
*plan* of steps over it does.  Each option saves activations kept for backward:

fused_block       every run conv (no bias) → BatchNorm2d (over T·B, running statistics, a
                  momentum) → IF/LIF/PLIF [→ 2×2 max-pool] is one fused step after the conv
                  (:mod:`plif.layers.fused_block`): it keeps the conv's output (a few-tap first
                  conv on the CPU, event input, makes it again in backward instead) and a byte per
                  pooled output, nothing else of the block.  Spikes equal to the composed layers'
                  unless a potential lies within rounding of the threshold; gradients to rounding.
                  With ``recompute_bn`` every conv's output is recomputed in backward instead.
                  The default of training (preset ``fused``).
spike_storage     layers whose input is spikes keep it as one byte (conv, linear, the linear after
                  time-invariant dropout), and max-pooling keeps a two-byte window offset
                  instead of int64 indices (on the CPU plif's pooling kernel, which keeps one
                  byte, runs instead).  Exact.
recompute_bn      a conv followed by BatchNorm does not keep the conv's output (BN's input):
                  backward recomputes it from the conv's input (one-byte spikes, or the network's
                  input for the first conv).  Exact (against the same plan without it).  Needs
                  ``spike_storage``.
h_bf16            neurons keep ``H`` in bf16.  Not exact (see :mod:`plif.layers.saved_dtype`).
chunk_first_block the network's first block (conv, BatchNorm, neuron, max-pool) on ``[T, B, ...]``
                  input runs a few time-steps at a time through the fused block and keeps only its
                  input and the neuron's state between chunks; backward replays the chunks
                  (:mod:`plif.layers.time_chunked`).  Not bit-identical: BatchNorm's statistics
                  and gradient sums and the conv's weight gradient add up chunk by chunk.
checkpoint_blocks each convolutional block (the layers up to and including a spatial pooling)
                  keeps only its input; backward runs the block forward again.  Exact; BatchNorm's
                  running statistics are updated once.

Nothing here is data dependent: the plan is made from the layers (and made again by the network
when one of them is replaced, e.g. by ``convert_sync_batchnorm``).  A SyncBatchNorm is never fused
into :class:`SpikeConvBN` (whose BatchNorm is ``native_batch_norm``, local to the process): its
own forward runs, and a checkpointed block's recomputation runs it again (synchronised).  Which option lowers
the *peak* of a step depends on the network: at T = 20 on 128×128 frames the peak is the first
block's backward, which ``exact`` lowers and bf16/checkpointing do not (``docs/lab/memory.md``).
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..layers import PerStepBatchNorm, TimeFolded, TimeInvariantDropout, unwrap
from ..layers.fused_block import FusedBlock, fusable_pool
from ..layers.saved_dtype import BF16SavedPotential
from ..layers.spike_input import SpikeConv2d, SpikeConvBN, SpikeLinear, conv_refusal
from ..layers.spike_pool import SpikeMaxPool2d, spike_poolable
from ..layers.time_chunked import TimeChunkedBlock
from ..neurons import IF, LIF, PLIF, SpikingNeuron
from .inputs import repeat_over_time
from .structure import hoists_first_layer, same_every_step, spike_inputs

__all__ = ["MemoryOptions", "make_plan", "run_plan", "MEMORY_PRESETS", "MEMORY_HELP", "DEFAULT_MEMORY", "fused_run",
           "why_not_fused", "memory_options", "hoist_static"]


@dataclass(frozen=True)
class MemoryOptions:
    """Which activation savings a network uses in training (all off: plain PyTorch layers)."""

    spike_storage: bool = False
    """Spike inputs kept as one byte, max-pool windows as two-byte offsets.  Exact."""
    recompute_bn: bool = False
    """A conv's output (BN's input) recomputed in backward.  Exact; needs ``spike_storage``."""
    h_bf16: bool = False
    """Neurons keep ``H`` in bf16.  Not exact."""
    checkpoint_blocks: bool = False
    """Each convolutional block keeps only its input and runs again in backward.  Exact."""
    chunk_first_block: bool = False
    """The first block runs a few time-steps at a time.  Not bit-identical (sums add up per chunk)."""
    fused_block: bool = False
    """Each conv → BatchNorm → neuron [→ 2×2 max-pool] runs BatchNorm, the neuron and the pool as one
    fused step.  Gradients equal to rounding."""

    def __post_init__(self):
        for f in fields(self):
            if not isinstance(getattr(self, f.name), bool):
                raise TypeError(f"MemoryOptions.{f.name} must be True or False, got {getattr(self, f.name)!r}")
        if self.recompute_bn and not self.spike_storage:
            raise ValueError("recompute_bn recomputes from the one-byte spikes: it needs spike_storage=True")

    def any(self) -> bool:
        """True if any saving is on."""
        return any(getattr(self, f.name) for f in fields(self))


_PRESETS: dict[str, tuple[MemoryOptions, str]] = {
    "fused": (MemoryOptions(spike_storage=True, fused_block=True),
              "each conv's BN, neuron and 2x2 max-pool as one fused step that keeps only the conv's output; "
              "gradients equal to the composed layers' to rounding"),
    "none": (MemoryOptions(), "the composed PyTorch layers"),
    "spikes": (MemoryOptions(spike_storage=True),
               "the composed layers, inputs that are spikes kept as one byte: the same results as none"),
    "exact": (MemoryOptions(spike_storage=True, recompute_bn=True, fused_block=True),
              "fused, the conv outputs recomputed from one-byte spikes in backward: the same results as fused"),
    "low": (MemoryOptions(spike_storage=True, recompute_bn=True, chunk_first_block=True, fused_block=True),
            "exact + the first conv block of event input run a few time-steps at a time and replayed in backward"),
    "checkpoint": (MemoryOptions(checkpoint_blocks=True),
                   "each conv block keeps only its input and runs again in backward: the same results as none"),
    "all": (MemoryOptions(spike_storage=True, recompute_bn=True, h_bf16=True, chunk_first_block=True, fused_block=True),
            "low + bf16 potentials of the other neurons"),
    "all+checkpoint": (MemoryOptions(spike_storage=True, recompute_bn=True, h_bf16=True, checkpoint_blocks=True,
                                     chunk_first_block=True, fused_block=True), "all + checkpoint"),
}

MEMORY_PRESETS: dict[str, MemoryOptions] = {name: opts for name, (opts, _) in _PRESETS.items()}
"""The one table of memory modes: ``plif train --memory``, :func:`plif.fuse`'s ``memory``,
``plif bench memory`` and the GPU script take these names, with these meanings
(:data:`plif.models.memory.MEMORY_HELP`): ``fused`` (the default) runs each conv block's BatchNorm,
neuron and pool as one fused step; ``none`` is the composed PyTorch layers; ``exact`` gives the same results as ``fused`` with the conv outputs recomputed in
backward, and ``spikes`` and ``checkpoint`` the same results as ``none``; ``low`` and ``all`` add the
inexact savings."""

MEMORY_HELP: dict[str, str] = {name: text for name, (_, text) in _PRESETS.items()}
"""What each of :data:`MEMORY_PRESETS` does, in one line (``plif train --help`` shows them)."""

DEFAULT_MEMORY = "fused"
"""The preset networks train with unless told otherwise (``plif train --memory``, :func:`build_network`)."""


def memory_options(memory) -> MemoryOptions:
    """The :class:`MemoryOptions` of a preset's name (or ``memory`` itself, if it is one); an
    unknown name is refused in one line listing the valid ones."""
    if isinstance(memory, MemoryOptions):
        return memory
    if not isinstance(memory, str) or memory not in MEMORY_PRESETS:
        raise ValueError(f"unknown memory mode {memory!r}; valid: {', '.join(MEMORY_PRESETS)}")
    return MEMORY_PRESETS[memory]


def _is(m: nn.Module, cls) -> bool:
    """A ``cls`` layer run once over ``T*B`` (not per step, as :class:`PerStepBatchNorm` runs)."""
    return isinstance(m, TimeFolded) and isinstance(unwrap(m), cls)


class _DropoutLinear:
    """Time-invariant dropout, an optional flatten and a linear layer on spikes, as one step:
    the linear layer keeps the spikes (one byte) and the ``[B, F]`` mask instead of ``s * mask``."""

    def __init__(self, dropout: TimeInvariantDropout, fc: nn.Linear):
        self.dropout, self.fc = dropout, SpikeLinear(fc)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        keep = self.dropout.mask(x)
        s = x.flatten(2)
        return self.fc(s, None if keep is None else keep.flatten(1))


def _bn_without_update(m: TimeFolded, x: torch.Tensor) -> torch.Tensor:
    """The BatchNorm layer itself (a SyncBatchNorm synchronises again, as in forward) with
    momentum 0: the same batch statistics, output and saved tensors as the first call (checkpoint
    matches them by position), the running statistics and the batch count left as they are."""
    bn = m.layer
    if not bn.training:
        return m(x)
    momentum, count = bn.momentum, bn.num_batches_tracked.clone()
    bn.momentum = 0.0
    try:
        return m(x)
    finally:
        bn.momentum = momentum
        bn.num_batches_tracked.copy_(count)


class _CheckpointedBlock:
    """Run ``layers`` keeping only the block's input for backward (recomputed there)."""

    def __init__(self, layers: list[nn.Module]):
        self.layers = layers

    def _run(self, x: torch.Tensor, start: int, calls: list) -> torch.Tensor:
        recompute = bool(calls)  # the second call is backward's recomputation
        calls.append(1)
        for m in self.layers[start:]:
            x = _bn_without_update(m, x) if recompute and _is(m, nn.modules.batchnorm._BatchNorm) else m(x)
        return x

    def _run_traced(self, x: torch.Tensor, start: int) -> torch.Tensor:
        for m in self.layers[start:]:
            x = m(x)
        return x

    def __call__(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """``start``: skip the block's first layers (the network ran them on a static input)."""
        if torch.compiler.is_compiling():
            # the compiler recomputes from the traced graph: the forward's in-place updates of the
            # running statistics are not replayed, and the Python call counter would be a side effect
            return checkpoint(self._run_traced, x, start, use_reentrant=False)
        calls: list = []
        if not torch.is_grad_enabled():
            return self._run(x, start, calls)
        return checkpoint(self._run, x, start, calls, use_reentrant=False)


def fused_run(layers: list[nn.Module], i: int) -> int:
    """How many layers from ``i`` the fused block takes: conv (no bias), exactly ``BatchNorm2d`` over
    ``T·B`` with running statistics and a momentum, an IF, LIF or PLIF layer, and a 2×2 stride-2
    max-pool if one follows; 0 where the layers are not such a run (:func:`why_not_fused` says why)."""
    return _fused_run(layers, i)[0]


def why_not_fused(layers: list[nn.Module], i: int) -> str:
    """Why the layers from the convolution ``layers[i]`` are not a fused run, in a few words ("" if
    they are one): the reasons :func:`fused_run` has, as ``plif.fuse(model, explain=True)`` shows them."""
    return _fused_run(layers, i)[1]


def _fused_run(layers, i: int) -> tuple[int, str]:
    conv = layers[i]
    if not _is(conv, nn.Conv2d):
        kind = type(unwrap(conv)).__name__
        return 0, (f"a {kind}: the fused block takes a 2-d convolution" if isinstance(unwrap(conv), nn.Conv1d | nn.Conv3d)
                   else f"a {kind}, not a time-folded nn.Conv2d")
    if conv.layer.bias is not None:
        return 0, "the convolution has a bias (nn.Conv2d(..., bias=False): BatchNorm's shift replaces it)"
    if (refused := conv_refusal(conv.layer)) is not None:
        return 0, f"{refused} (the fused block convolves as F.conv2d does, zero padding)"
    if i + 1 >= len(layers):
        return 0, "no BatchNorm follows the convolution"
    bn = layers[i + 1]
    inner = unwrap(bn)
    if not isinstance(inner, nn.modules.batchnorm._BatchNorm):
        return 0, f"a {type(inner).__name__} follows the convolution, not a BatchNorm2d"
    if not _is(bn, nn.BatchNorm2d) or type(inner) is not nn.BatchNorm2d:
        how = "per time-step" if isinstance(bn, PerStepBatchNorm) else f"a {type(inner).__name__}"
        return 0, f"the BatchNorm is {how}, not exactly nn.BatchNorm2d over T*B"
    if not inner.track_running_stats or inner.momentum is None:
        return 0, "BatchNorm without running statistics or a momentum (track_running_stats=False, momentum=None)"
    if i + 2 >= len(layers):
        return 0, "no neuron follows the BatchNorm"
    if type(layers[i + 2]) not in (IF, LIF, PLIF):
        return 0, f"a {type(layers[i + 2]).__name__} follows the BatchNorm, not an IF, LIF or PLIF layer"
    if i + 3 < len(layers) and _is(layers[i + 3], nn.MaxPool2d) and fusable_pool(layers[i + 3].layer):
        return 4, ""
    return 3, ""


def make_plan(layers: list[nn.Module], opts: MemoryOptions, spikes_in: bool = False) -> list[tuple[int, int, object]]:
    """``[(first layer, end layer, step)]``: the callables ``forward`` runs in order, each
    running the layers ``first .. end-1``.  With every option off, each layer is its own step.
    ``spikes_in``: the first layer's input is spikes (layers inside a model, :func:`plif.fuse`);
    a network's input is not assumed to be."""
    steps: list[tuple[int, int, object]] = []
    fed = spike_inputs(layers, training=True, spikes_in=spikes_in)
    i, n = 0, len(layers)
    # what runs where the fused block cannot (a device without its kernels, an exotic surrogate)
    composed = make_plan(layers, replace(opts, fused_block=False, chunk_first_block=False,
                                         checkpoint_blocks=False), spikes_in) if opts.fused_block else None
    used = fused_run(layers, 0) if opts.chunk_first_block else 0
    if used:
        first = make_plan(layers[:used], replace(opts, chunk_first_block=False, checkpoint_blocks=False), spikes_in)
        steps.append((0, used, TimeChunkedBlock(list(layers[:used]), _runner(first, 0))))
        i = used
    while i < n:
        m, step, used, binary = layers[i], layers[i], 1, fed[i]
        nxt = layers[i + 1] if i + 1 < n else None
        run = fused_run(layers, i) if opts.fused_block else 0
        if run:
            conv_step = SpikeConv2d(m.layer) if binary and opts.spike_storage else m
            step, used = FusedBlock(list(layers[i:i + run]), conv_step, _runner(_within(composed, i, i + run), i),
                                    opts.recompute_bn, binary), run
        elif isinstance(m, SpikingNeuron):
            step = BF16SavedPotential(m) if opts.h_bf16 else m
        elif _is(m, nn.MaxPool2d):
            step = SpikeMaxPool2d(m.layer) if opts.spike_storage and spike_poolable(m.layer) else m
        elif _is(m, nn.Flatten):
            pass
        elif isinstance(m, TimeInvariantDropout) and binary and opts.spike_storage:
            j = i + 1 + (1 if nxt is not None and _is(nxt, nn.Flatten) else 0)
            if j < n and _is(layers[j], nn.Linear) and layers[j].layer.bias is None:
                step, used = _DropoutLinear(m, layers[j].layer), j - i + 1
        elif _is(m, nn.Conv2d) and m.layer.bias is None and (binary or opts.recompute_bn):
            # exactly BatchNorm2d: a SyncBatchNorm (not a subclass) keeps its own, synchronised, forward
            if opts.recompute_bn and nxt is not None and _is(nxt, nn.BatchNorm2d) and nxt.layer.track_running_stats:
                step, used = SpikeConvBN(m, nxt, binary=binary), 2
            elif binary and opts.spike_storage:
                step = SpikeConv2d(m.layer)
        elif _is(m, nn.Linear) and binary and opts.spike_storage and m.layer.bias is None:
            step = SpikeLinear(m.layer)
        steps.append((i, i + used, step))
        i += used
    return _checkpoint_blocks(steps, layers) if opts.checkpoint_blocks else steps


def _within(steps, lo: int, hi: int) -> list:
    """The steps of a plan that run the layers ``lo .. hi-1`` (which a step never straddles)."""
    return [s for s in steps if lo <= s[0] and s[1] <= hi]


def _runner(steps, offset: int):
    """``(x, start) ->`` the ``steps`` on ``x``, ``start`` counted from layer ``offset``."""
    return lambda x, start=0: run_plan(steps, x, offset + start)


def hoist_static(layers, x: torch.Tensor, T: int) -> tuple[torch.Tensor, int]:
    """``(input of the plan's layer start, start)`` for a static input ``x [B, ...]`` fed at each of ``T``
    steps: the first layer, when it is a time-folded convolution or linear layer, runs once on ``x``
    (and after it what maps a static input to a static output, :func:`~.structure.same_every_step`),
    and its output is repeated over time as a stride-0 view (which the fused block reads in place and
    whose gradient it sums over time as it goes); otherwise ``x`` is repeated.  Exactly the result of
    repeating the input first.  ``run_plan(steps, *hoist_static(layers, x, T))`` runs the rest."""
    start = 0
    if hoists_first_layer(layers):
        x, start = layers[0].layer(x), 1
        while start < len(layers) and same_every_step(layers[start]):
            x, start = layers[start].layer(x), start + 1
    return repeat_over_time(x, T), start


def run_plan(steps: list[tuple[int, int, object]], x: torch.Tensor, start: int = 0) -> torch.Tensor:
    """Run a plan's steps on ``x``; ``start``: the layers before it already ran (a static input's
    hoisted first layers), so a step beginning earlier is told how many of its layers to skip."""
    for first, end, step in steps:
        if end <= start:
            continue
        x = step(x, start - first) if first < start else step(x)
    return x


def _checkpoint_blocks(steps, layers):
    """Replace the steps of each block (up to and including a spatial pooling, before the first
    flatten or linear layer) by one checkpointed step over the block's plain layers."""
    out, pending = [], []
    for first, end, step in steps:
        m = layers[first]
        if pending is not None and (_is(m, (nn.Flatten, nn.Linear)) or isinstance(step, _DropoutLinear)):
            out.extend(pending)
            pending = None
        if pending is None or isinstance(step, TimeChunkedBlock):  # a chunked block already keeps little
            out.append((first, end, step))
            continue
        if isinstance(m, PerStepBatchNorm):
            raise ValueError("checkpoint_blocks needs BatchNorm over T*B (not bn_per_step)")
        pending.append((first, end, step))
        if _is(m, (nn.MaxPool2d, nn.AvgPool2d)):
            lo = pending[0][0]
            out.append((lo, end, _CheckpointedBlock(list(layers[lo:end]))))
            pending = []
    return out + (pending or [])
