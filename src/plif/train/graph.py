"""``plif train --cuda-graph`` (the default on CUDA, :mod:`plif.train.speed`): the whole training step
captured once as a CUDA graph and replayed.

One step is forward, the run's loss (the paper's MSE on the firing rates by default), backward and a
fused Adam update with ``capturable=True`` (or fused SGD); the learning rate lives in a device tensor
that the schedule fills between epochs (LR schedulers update a tensor ``lr`` in place), so the graph
never changes.
Inputs are copied into static buffers (a device-to-device copy, data already on the GPU); loss,
correct count and sample count are accumulated in device tensors inside the graph and read once
per epoch.  Evaluation is a second, forward-only graph over a static buffer of
``eval_batch_size``: the last short batch is padded and masked (exact, since in eval mode every
sample is independent), never dropped and never recaptured.  A short *training* batch cannot be
padded (BatchNorm statistics would see the padding), so it gets its own graph, captured the first
time that size appears and replayed in every later epoch.

Capturing needs warm-up iterations, which would train on the first batch: the parameters,
buffers, optimiser state and RNG state are snapshotted before and restored after, so a graph run
and an eager run from the same seed agree step for step.

With ``--compile`` the forward runs Inductor's compiled network (``net``) inside the captured step:
its kernels are compiled during the warm-up, the first time each shape and mode (training,
evaluation) is seen, and recorded with the rest; the benchmark's ``compile+graph`` step
(:mod:`plif.bench.train`) is this trainer.

Everything except the capture itself runs eagerly with ``capture=False`` (any device): the same
buffers, accumulators and pad-and-mask code, which is how the CPU tests check it against the
ordinary step of :mod:`plif.train.loop`.
"""
from __future__ import annotations

import contextlib
from typing import Callable, Iterable

import torch

from ..layers.precision import resolve_amp
from .loop import Diverged, train_step
from .loss import Loss

__all__ = ["GraphTrainer", "check_graph_options", "autocast_context"]

AMP_DTYPES = {"bf16": torch.bfloat16}


def check_graph_options(device: torch.device, cuda_graph: bool, amp: str | None, world: int = 1) -> None:
    """Refuse, in one line naming the option, what cannot run on ``device`` (``--compile`` runs
    inside the graph, so it combines with it)."""
    if amp is not None and amp not in AMP_DTYPES:
        raise ValueError(f"--amp {amp}: unknown; valid: {', '.join(AMP_DTYPES)}")
    if cuda_graph and device.type != "cuda":
        raise ValueError(f"--cuda-graph needs a CUDA device, but this run is on {device} "
                         f"(CUDA available: {torch.cuda.is_available()}); leave it out (or --no-cuda-graph to "
                         "resume a run that used it)")
    if amp is not None and device.type not in ("cuda", "cpu"):
        raise ValueError(f"--amp {amp}: autocast is validated on CUDA and the CPU only, but this run is on "
                         f"{device}; drop --amp")
    if cuda_graph and world > 1:
        raise ValueError("--cuda-graph is single-process for now; leave it out under torchrun (or --no-cuda-graph)")


def autocast_context(device: torch.device, amp: str | None):
    """``torch.autocast`` for ``--amp`` (weights, BatchNorm and the neuron state stay fp32).  The
    cast-weight cache is off, as CUDA-graph capture requires (each weight is used once per step).
    ``amp`` as a run records it (``"bf16"`` or None), or as asked (``"none"``, ``"auto"``: decided here
    for ``device`` as :func:`plif.layers.precision.resolve_amp` decides it for a run)."""
    amp = resolve_amp(amp, device.type)
    if amp is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=AMP_DTYPES[amp], cache_enabled=False)


class _Snapshot:
    """Parameters, buffers, optimiser state and RNG, copied back in place after warm-up."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, device: torch.device):
        self.model, self.optimizer, self.device = model, optimizer, device
        self.tensors = [t.detach().clone() for t in self._model_tensors()]
        self.opt_state = {p: {k: v.clone() for k, v in s.items() if torch.is_tensor(v)}
                          for p, s in optimizer.state.items()}
        self.cpu_rng = torch.get_rng_state()
        self.cuda_rng = torch.cuda.get_rng_state(device) if device.type == "cuda" else None

    def _model_tensors(self):
        return list(self.model.parameters()) + list(self.model.buffers())

    def restore(self) -> None:
        with torch.no_grad():
            for t, saved in zip(self._model_tensors(), self.tensors):
                t.copy_(saved)
            for p, s in self.optimizer.state.items():
                saved = self.opt_state.get(p, {})
                for k, v in s.items():
                    if torch.is_tensor(v):
                        v.copy_(saved[k]) if k in saved else v.zero_()  # state born in warm-up: fresh
        torch.set_rng_state(self.cpu_rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state(self.cuda_rng, self.device)


def capture_cuda_graph(body: Callable[[], None], device: torch.device, warmup: int = 3,
                       after_warmup: Callable[[], None] | None = None) -> Callable[[], None]:
    """Run ``body`` ``warmup`` times on a side stream (as capture requires), call ``after_warmup``
    (e.g. to undo what the warm-up changed), then record ``body`` once into a CUDA graph (recorded,
    not run) and return its replay."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(warmup):
            body()
    torch.cuda.current_stream(device).wait_stream(side)
    if after_warmup is not None:
        after_warmup()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    return graph.replay


class GraphTrainer:
    """Static-shape training and evaluation with device-side totals; CUDA-graph replay when ``capture``.

    ``net`` is what the forward calls (``torch.compile(model)``, default ``model`` itself); ``model``
    owns the parameters, buffers and state that warm-up snapshots and restores; ``loss`` the run's
    (:class:`plif.train.loss.Loss`, default the paper's MSE)."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, num_classes: int,
                 device: torch.device, capture: bool = True, amp: str | None = None, warmup: int = 3,
                 net: torch.nn.Module | None = None, time_major: bool = False, loss: Loss | None = None):
        if capture and device.type != "cuda":
            raise ValueError(f"CUDA-graph capture needs a CUDA device, got {device}")
        self.model, self.optimizer, self.num_classes = model, optimizer, num_classes
        self.loss = Loss() if loss is None else loss
        self.net = model if net is None else net
        self.device, self.capture, self.amp, self.warmup = device, capture, amp, warmup
        self.batch_dim = 1 if time_major else 0  # [T, B, ...] input (event frames, a --model network) or [B, ...]
        for group in optimizer.param_groups if optimizer is not None else ():
            if not torch.is_tensor(group["lr"]):  # e.g. resumed from an eager run's checkpoint:
                # a float would be baked into the graph and the schedule would never reach it
                group["lr"] = torch.tensor(float(group["lr"]), device=device)
        self._train: dict[tuple, tuple] = {}  # input shape -> (x, y, replay)
        self._eval: dict[tuple, tuple] = {}
        z = lambda: torch.zeros((), device=device)  # noqa: E731
        self.loss_sum, self.correct, self.seen = z(), z(), z()
        self.finite = torch.ones((), dtype=torch.bool, device=device)  # every training step so far

    # ------------------------------------------------------------------------------- plumbing
    def _graphed(self, body: Callable[[], None]) -> Callable[[], None]:
        """``body`` itself (eager), or captured once after warm-up with every state restored."""
        if not self.capture:
            return body
        snap = _Snapshot(self.model, self.optimizer, self.device)
        totals = [t.clone() for t in self._accumulators()]

        def restore():
            snap.restore()
            for t, saved in zip(self._accumulators(), totals):
                t.copy_(saved)
        return capture_cuda_graph(body, self.device, self.warmup, after_warmup=restore)

    def _accumulators(self):
        return self.loss_sum, self.correct, self.seen, self.finite

    def reset_totals(self) -> None:
        for t in (self.loss_sum, self.correct, self.seen):
            t.zero_()
        self.finite.fill_(True)

    def totals(self) -> tuple[float, float, int]:
        """``(mean loss, accuracy, samples)``: the one host synchronisation of an epoch."""
        loss, correct, n, bad = torch.stack([self.loss_sum, self.correct, self.seen, (~self.finite).float()]).tolist()
        if bad:
            raise Diverged("the loss or a parameter became NaN or infinite")
        if n == 0:
            return float("nan"), float("nan"), 0
        return loss / n, correct / n, int(n)

    # ---------------------------------------------------------------------------------- train
    def _train_slot(self, x: torch.Tensor, y: torch.Tensor):
        key = tuple(x.shape)
        if key not in self._train:
            sx, sy = torch.zeros_like(x), torch.zeros_like(y)
            sx.copy_(x)
            sy.copy_(y)
            model, net, opt, nc, loss_fn = self.model, self.net, self.optimizer, self.num_classes, self.loss

            params = list(model.parameters())

            def body():  # the step of plif train, gradients kept in place for the graph
                loss, correct, finite = train_step(net, opt, sx, sy, nc, params, set_to_none=False,
                                                   autocast=lambda: autocast_context(self.device, self.amp), loss=loss_fn)
                with torch.no_grad():
                    self.loss_sum += loss * sy.shape[0]
                    self.correct += correct
                    self.seen += sy.shape[0]
                    self.finite &= finite
            for p in model.parameters():  # grads must exist (and stay put) before capture
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
            self._train[key] = (sx, sy, self._graphed(body))
        return self._train[key]

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """One step on ``(x, y)``; no host synchronisation (replay is asynchronous)."""
        sx, sy, run = self._train_slot(x, y)
        sx.copy_(x, non_blocking=True)
        sy.copy_(y, non_blocking=True)
        run()

    def train_epoch(self, batches: Iterable, progress=None) -> tuple[float, float, int]:
        self.model.train()
        self.reset_totals()
        for x, y in batches:
            self.train_step(x, y)
            if progress is not None:
                progress.update(y.shape[0])
        if not self._train:
            raise ValueError("the training set is smaller than one batch; lower --batch-size")
        return self.totals()

    # ----------------------------------------------------------------------------------- eval
    def _eval_slot(self, x: torch.Tensor, y: torch.Tensor, size: int):
        d = self.batch_dim
        key = (*x.shape[:d], size, *x.shape[d + 1:])
        if key not in self._eval:
            sx = torch.zeros(key, dtype=x.dtype, device=x.device)
            sy = torch.zeros(size, dtype=y.dtype, device=y.device)
            n_valid = torch.zeros((), dtype=torch.long, device=x.device)
            net, nc, per_sample_loss = self.net, self.num_classes, self.loss.per_sample

            def body():
                with torch.no_grad(), autocast_context(self.device, self.amp):
                    out = net(sx)
                with torch.no_grad():
                    per_sample, rate = per_sample_loss(out, sy, nc)
                    mask = torch.arange(size, device=sx.device) < n_valid
                    self.loss_sum += torch.where(mask, per_sample, 0.0).sum()
                    self.correct += ((rate.argmax(1) == sy) & mask).sum()
                    self.seen += n_valid
            self._eval[key] = (sx, sy, n_valid, self._graphed(body))
        return self._eval[key]

    def evaluate(self, batches: Iterable, batch_size: int, read: bool = True) -> tuple[float, float, int] | None:
        """Every sample once: batches of at most ``batch_size``, a short one padded and masked.
        ``read=False`` leaves the totals on the device (no synchronisation at all)."""
        self.model.eval()
        self.reset_totals()
        for x, y in batches:
            b = y.shape[0]
            if b > batch_size:
                raise ValueError(f"an evaluation batch of {b} exceeds the static buffer of {batch_size}")
            sx, sy, n_valid, run = self._eval_slot(x, y, batch_size)
            sx.narrow(self.batch_dim, 0, b).copy_(x, non_blocking=True)
            sy[:b].copy_(y, non_blocking=True)
            if b < batch_size:  # the padding holds stale samples: finite, masked out
                sy[b:].zero_()
            n_valid.fill_(b)
            run()
        return self.totals() if read else None
