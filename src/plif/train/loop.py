"""One training epoch and one evaluation pass, with no host synchronisation per step.

Loss and correct counts accumulate in device tensors and are read once at the end; a step is
forward, the run's loss (the paper's MSE on the voting layer's firing rate unless ``--loss`` says
otherwise, :mod:`plif.train.loss`), backward and the optimiser update.  Divergence is
watched the same way: after every step a device flag records whether the loss and every
parameter are still finite, and it is read with the totals at the end of the epoch.
"""
from __future__ import annotations

import torch

from .loss import Loss, rate_mse_loss
from .malloc import keep_freed_memory

__all__ = ["train_step", "train_epoch", "EpochTotals", "evaluate", "Diverged", "all_finite"]


class Diverged(FloatingPointError):
    """The loss or a parameter became NaN or infinite during an epoch."""


def all_finite(tensors) -> torch.Tensor:
    """A device bool: every element of every tensor is finite (no host sync).

    A reduction per tensor into which NaN and infinity propagate (+inf beside -inf makes NaN), so
    it is finite exactly when the tensor is, except where the reduction itself overflows.  On the
    CPU the plain sum (ATen's reduction there runs on every thread; the sum overflows only past
    3.4e38): 1.9 / 1.2 ms on one / two threads for the paper network's 13.7 M parameters against
    4.5 / 4.9 ms for ``torch._foreach_norm`` (one thread whatever the count; its squares overflow
    past ~1e19), the 2-core Intel Xeon, torch 2.13.0+cpu, quiet.  Elsewhere one fused 2-norm per
    tensor: a few launches for all of them (an eager CUDA step is bound by launches)."""
    tensors = [t for t in tensors if t.is_floating_point()]
    if not tensors:
        return torch.ones((), dtype=torch.bool)
    if tensors[0].device.type == "cpu":
        return torch.stack([t.sum() for t in tensors]).isfinite().all()
    return torch.stack(torch._foreach_norm(tensors)).isfinite().all()


def train_step(model, optimizer, x, y, num_classes: int, params=None, set_to_none: bool = True, autocast=None,
               loss: Loss | None = None):
    """The one training step of plif (``plif train``, the graph trainer and every benchmark):
    zero the gradients, the loss (default the paper's MSE on the firing rate; ``loss`` a
    :class:`plif.train.loss.Loss`), backward, optimiser update, and a device flag that the loss and
    every parameter in ``params`` (default: the optimiser's) are still finite.  The prediction is
    the argmax of the mean over T of the output, whatever the loss.

    Returns detached ``(loss, correct, finite)`` device tensors; nothing synchronises with the host,
    so the step can be captured in a CUDA graph (there ``set_to_none=False`` keeps the gradient
    buffers in place).  ``autocast``: a context-manager factory entered around the forward only.
    """
    if params is None:
        params = [p for g in optimizer.param_groups for p in g["params"]]
    optimizer.zero_grad(set_to_none=set_to_none)
    if autocast is None:
        out = model(x)
    else:
        with autocast():
            out = model(x)
    value, rate = (rate_mse_loss if loss is None else loss)(out, y, num_classes)
    value.backward()
    optimizer.step()
    value = value.detach()
    return value, (rate.argmax(1) == y).sum(), torch.isfinite(value) & all_finite(params)


class EpochTotals:
    """What one process's epoch has accumulated so far: device tensors (loss sum, correct count,
    all-finite flag) and Python counts, so a mid-epoch checkpoint can carry them to a resume."""

    def __init__(self):
        self.loss_sum = self.correct = self.finite = None
        self.seen = self.steps = 0

    def add(self, loss: torch.Tensor, correct: torch.Tensor, ok: torch.Tensor, b: int) -> None:
        self.loss_sum = loss * b if self.loss_sum is None else self.loss_sum + loss * b
        self.correct = correct if self.correct is None else self.correct + correct
        self.finite = ok if self.finite is None else self.finite & ok
        self.seen += b
        self.steps += 1

    def state_dict(self) -> dict:
        t = {k: None if v is None else v.detach().cpu().clone() for k, v in
             (("loss_sum", self.loss_sum), ("correct", self.correct), ("finite", self.finite))}
        return {**t, "seen": self.seen, "steps": self.steps}

    @classmethod
    def from_state(cls, state: dict, device) -> "EpochTotals":
        out = cls()
        for k in ("loss_sum", "correct", "finite"):
            setattr(out, k, None if state[k] is None else state[k].to(device))
        out.seen, out.steps = int(state["seen"]), int(state["steps"])
        return out


def train_epoch(model, optimizer, batches, num_classes: int, progress=None, all_reduce=None,
                check_every: int = 512, totals: EpochTotals | None = None, after_step=None, loss: Loss | None = None):
    """Run one epoch over ``batches``; returns ``(mean loss, accuracy, samples)`` as Python numbers.

    Raises :class:`Diverged` if the loss or any parameter stopped being finite at any step: the
    flag is updated on the device after every step and read every ``check_every`` steps (one host
    sync each, outside the step, so long paper epochs stop early) and at the end of the epoch.
    totals: continue an epoch from what a mid-epoch checkpoint saved (``batches`` then holds only
    the remaining batches).  after_step: called with the totals after every step (mid-epoch
    checkpoints; it may raise to stop the epoch there).  loss: :func:`train_step`'s.
    """
    model.train()
    params = [p for g in optimizer.param_groups for p in g["params"]]
    if params and params[0].device.type == "cpu":
        keep_freed_memory()  # no page faults for the step's large tensors every step (plif.train.malloc)
    t = totals if totals is not None else EpochTotals()
    for x, y in batches:
        value, c, ok = train_step(model, optimizer, x, y, num_classes, params, loss=loss)
        t.add(value, c, ok, y.shape[0])
        if progress is not None:
            progress.update(y.shape[0])
        if all_reduce is None and check_every and t.steps % check_every == 0 and not bool(t.finite):
            raise Diverged(f"the loss or a parameter became NaN or infinite (seen at step {t.steps})")
        if after_step is not None:
            after_step(t)
    if t.seen == 0:
        raise ValueError("the training set is smaller than one batch; lower --batch-size")
    loss_sum = t.loss_sum
    bad = (~t.finite).float()
    totals = torch.stack([loss_sum.float(), t.correct.float(), torch.tensor(float(t.seen), device=loss_sum.device),
                          bad.to(loss_sum.device)])
    if all_reduce is not None:
        totals = all_reduce(totals)
    loss_total, correct_total, n, diverged = totals.tolist()
    if diverged:
        raise Diverged("the loss or a parameter became NaN or infinite")
    return loss_total / n, correct_total / n, int(n)


@torch.no_grad()
def evaluate(model, batches, num_classes: int, all_reduce=None, progress=None, loss: Loss | None = None):
    """Accuracy and mean loss over ``batches`` in eval mode: ``(loss, accuracy, samples)``.

    progress: a tqdm-like bar advanced by each batch's size; loss: the run's
    (:class:`plif.train.loss.Loss`, default the paper's MSE)."""
    model.eval()
    totals = None
    for x, y in batches:
        value, rate = (rate_mse_loss if loss is None else loss)(model(x), y, num_classes)
        t = torch.stack([value.float() * y.shape[0], (rate.argmax(1) == y).sum().float(),
                         torch.tensor(float(y.shape[0]), device=value.device)])
        totals = t if totals is None else totals + t
        if progress is not None:
            progress.update(int(y.shape[0]))
    if totals is None:
        totals = torch.zeros(3)
    if all_reduce is not None:
        totals = all_reduce(totals)
    loss_total, correct, n = totals.tolist()
    if n == 0:
        return float("nan"), float("nan"), 0
    return loss_total / n, correct / n, int(n)
