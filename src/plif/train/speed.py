"""How a run executes on its device: the whole step as one CUDA graph, the network compiled inside it.

``cuda_graph``, ``compile`` and ``memory`` left out (``None``, "auto") are decided here for the run's
device and number of processes; ``config.json`` records what was decided and which were
(``speed_auto``), and a resume decides those again for its own device and processes (a CUDA run
continued on the CPU, under torchrun or with ``--checkpoint-every`` trains eagerly; ``plif eval``
evaluates eagerly, with the run's TF32 and autocast).  The numbers are the H200 run's
(``docs/gpu/h200-2026-11-27/``; Fashion-MNIST paper step, T = 8, wall ms at batch 16 / 128):

- ``cuda_graph`` auto: on CUDA in a single process.  The eager step is host-bound (8.68 / 9.24 ms,
  the device busy 1.6 ms of the 8.7) and the captured one is not (1.55 / 8.48 ms).  Off, with one
  line saying why, where the graph cannot replay what was asked for (:func:`graph_obstacle`).
- ``compile`` auto: on inside the graph for the networks where that was measured faster
  (:data:`COMPILE_MEASURED`: 1.19 / 5.59 ms against 1.55 / 8.48), off elsewhere (one line on
  CUDA says so; ``--compile`` compiles anyway).  Inductor's compile takes tens of seconds once,
  in the first epoch.
- ``memory`` auto: ``none`` (the composed layers, which Inductor fuses around the neuron kernels:
  what was measured) where a measured network is compiled inside the graph, ``fused`` (each conv
  block's BatchNorm, neuron and max-pool as one fused step) everywhere else: the CPU, and also
  another network that ``--compile`` compiles inside the graph.  The GPU
  script's second plan measures the fused blocks against ``none`` on the conv-heavy networks.

``amp``: ``auto`` and ``none`` become what the run records, ``bf16`` or null (fp32)
(:func:`plif.layers.precision.resolve_amp`: ``auto`` is bf16 on a CPU with native bf16); a resume
keeps the recorded value, as it keeps every setting of the run's numerics.

On the CPU both stay off and nothing is said: a CUDA graph needs CUDA, and compiling on the CPU
stays opt-in (``--compile``).
"""
from __future__ import annotations

import dataclasses

from ..layers.precision import resolve_amp
from ..models.memory import DEFAULT_MEMORY
from .config import TrainConfig

__all__ = ["resolve_speed", "graph_obstacle", "auto_memory", "COMPILE_MEASURED"]

COMPILE_MEASURED = {
    "fashion-mnist": "H200: 1.19 / 5.59 ms a step at batch 16 / 128 compiled in the graph, 1.55 / 8.48 ms not",
    "mnist": "the network, input shape and T of fashion-mnist, where it was measured",
}
"""Datasets whose paper network (at the paper's T) trains faster compiled inside the CUDA graph,
with the evidence; the GPU script's second plan measures CIFAR-10, DVS128 Gesture and CIFAR10-DVS
(``benchmarks/gpu/``)."""


def graph_obstacle(cfg: TrainConfig, world: int) -> str | None:
    """Why the whole-step CUDA graph cannot replay what ``cfg`` asks for, or None."""
    if world > 1:
        return f"torchrun runs {world} processes and the captured step is single-process"
    if cfg.checkpoint_every:
        return "--checkpoint-every saves within an epoch, and a captured epoch has no step boundary to save at"
    if cfg.log == "tensorboard":
        return ("--log tensorboard counts firing rates with forward hooks, which a replayed graph does not run "
                "(--cuda-graph captures anyway, without firing rates)")
    if cfg.checkpoint_blocks:
        return "--checkpoint-blocks recomputes blocks with torch.utils.checkpoint, whose RNG stash cannot be captured"
    return None


def _compile_obstacle(cfg: TrainConfig) -> str | None:
    """Why auto does not compile ``cfg``'s network inside the graph, or None (``memory`` left to
    plif counts as ``none``: :func:`auto_memory` picks it where this says None)."""
    from ..catalog import get_dataset

    if cfg.memory not in (None, "none") or cfg.checkpoint_blocks:
        return f"--memory {cfg.memory}{' --checkpoint-blocks' if cfg.checkpoint_blocks else ''} was measured eagerly only"
    entry = get_dataset(cfg.dataset)
    if cfg.dataset not in COMPILE_MEASURED or cfg.network != entry.network or cfg.T != entry.T:
        return ("compiling inside the graph was measured faster only for the paper networks of "
                f"{', '.join(COMPILE_MEASURED)}")
    return None


def auto_memory(cfg: TrainConfig, graph: bool, compiled: bool) -> str:
    """``--memory`` left to plif (``None``): ``none`` where the network runs compiled inside the CUDA
    graph as measured, the fused conv blocks (:data:`~plif.models.memory.DEFAULT_MEMORY`) elsewhere;
    a value given is kept."""
    if cfg.memory is not None:
        return cfg.memory
    return "none" if graph and compiled and _compile_obstacle(cfg) is None else DEFAULT_MEMORY


def resolve_speed(cfg: TrainConfig, device_type: str, world: int = 1) -> tuple[TrainConfig, list[str]]:
    """``cfg`` with ``cuda_graph``, ``compile`` and ``memory`` decided where they were left to plif (``None``),
    and the lines that say what auto turned off on CUDA (none on the CPU).  ``cfg`` must be
    resolved (:func:`plif.train.config.resolve_config`); a value given explicitly is kept, and
    :func:`plif.train.graph.check_graph_options` refuses it where it cannot run."""
    notes = []
    graph = cfg.cuda_graph
    if graph is None:
        why = "not a CUDA device" if device_type != "cuda" else graph_obstacle(cfg, world)
        graph = why is None
        if why and device_type == "cuda":
            notes.append(f"CUDA graph: off, {why}; training eagerly (--cuda-graph / --no-cuda-graph decide it)")
    compiled = cfg.compile
    if compiled is None:
        why = "no CUDA graph" if not graph else _compile_obstacle(cfg)
        compiled = why is None
        if why and graph:
            notes.append(f"torch.compile: off, {why} (--compile / --no-compile decide it)")
    return dataclasses.replace(cfg, cuda_graph=graph, compile=compiled, memory=auto_memory(cfg, graph, compiled),
                               amp=resolve_amp(cfg.amp, device_type)), notes
