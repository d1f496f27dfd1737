"""The epochs of a run: each one trained, evaluated and checkpointed (also every
``--checkpoint-every`` steps), and the run stopped where it should (the last epoch, a time limit,
a signal).

Everything random in an epoch is seeded from ``(seed, epoch)``, so on CPU a run killed at any
point and resumed ends bit-for-bit where an uninterrupted run does.  Non-finite weights are never
written: a diverged epoch stops the run and the last good checkpoint stays.
"""
from __future__ import annotations

import itertools
import math
import time
from typing import Iterator

import torch

from ..data.pipeline import epoch_generator
from ..progress import sample_bar
from ..runs.checkpoint import nonfinite_count, save_checkpoint
from .distributed import all_gather_object, all_reduce_sum, any_rank
from .graph import autocast_context
from .loop import Diverged, EpochTotals, evaluate, train_epoch
from .precise_bn import precise_bn_note, reestimate_bn
from .resume import resume_state, rng_state, set_rng_state
from .state import Progress, Session
from .stopping import Stopper
from .summary import epoch_line, run_summary
from .tb_log import firing_rates, layer_taus

__all__ = ["run_epochs"]


class _StopNow(Exception):
    """Raised after a mid-epoch checkpoint when the run should stop there."""


def run_epochs(s: Session, progress: Progress, stopper: Stopper, log) -> Iterator[Progress]:
    """Train from ``progress`` (a fresh run's empty one, or what a resume restored) to ``--epochs``,
    yielding the new :class:`Progress` after each epoch is written, and once more, with its
    ``stopped`` reason (``"time limit"``, ``"SIGTERM"``, ...), when the run stops before its last
    epoch.  The caller keeps the last one: what the run finished, however the loop ends."""
    cfg = s.cfg
    reduce = all_reduce_sum if s.dist.world > 1 else None
    steps = s.data.steps_per_epoch(cfg.batch_size, s.dist.world)
    note = precise_bn_note(s.model, steps)
    precise = note is not None
    first = progress.epoch
    if precise and s.main and first < cfg.epochs:
        log(note)
    if s.restarted and first < cfg.epochs and any_rank(stopper.expired(), s.device, s.dist.world):
        # a group torchrun started again (after a crash) past --time-limit stops at once instead of
        # training one stretch more
        yield progress.stop("time limit")
        return
    for epoch in range(first, cfg.epochs):
        try:
            row = _run_epoch(s, progress, epoch, steps, reduce, stopper, precise)
        except _StopNow as e:
            yield progress.stop(str(e))
            return
        s.scheduler.step()
        if s.main:
            _save_epoch(s, progress, row)
            if s.tb is not None:
                s.tb.epoch(row)
            log(epoch_line(row, cfg))
        progress = progress.after(row)
        yield progress
        if epoch + 1 < cfg.epochs:
            stopped = _stop_reason(s, stopper)
            if stopped:
                yield progress.stop(stopped)
                return


def _stop_reason(s: Session, stopper: Stopper) -> str | None:
    """Right after a checkpoint: why to stop now, agreed by every rank (rank 0's reason is given)."""
    reason = stopper.reason()
    if any_rank(reason is not None, s.device, s.dist.world):
        return reason or "another process stopped"
    return None


def _diverged(s: Session, epoch: int) -> FloatingPointError:
    last = s.folder.checkpoint("last")
    if epoch > 0 and last.is_file():  # a resume refuses a non-finite last.pt, so this one is good
        good = f"the last good checkpoint is {last} (epoch {epoch}); lower --lr and --resume, or start again"
    elif epoch > 0:
        good = f"{last} is missing, so there is nothing to resume; lower --lr and start again (--restart)"
    else:
        good = "no epoch finished, so no checkpoint was written; lower --lr and start again"
    return Diverged(f"training diverged in epoch {epoch + 1}: the loss or the weights became NaN or infinite; "
                    f"stopped without saving them; {good}")


def _run_epoch(s: Session, progress: Progress, epoch: int, steps: int, reduce, stopper: Stopper,
               precise_bn: bool = False) -> dict:
    """Epoch ``epoch + 1`` trained and evaluated: its metrics row (``progress``: the run before it)."""
    cfg, data, dist = s.cfg, s.data, s.dist
    gen = epoch_generator(cfg.seed, epoch)
    torch.manual_seed(cfg.seed * 7919 + epoch * 104729 + dist.rank)  # dropout masks
    totals, skip = None, 0
    if progress.step:  # resumed from a mid-epoch checkpoint of this epoch
        skip, totals = progress.step, EpochTotals.from_state(progress.rank_state["totals"], s.device)
        set_rng_state(progress.rank_state["rng"], s.device)
    lr = float(s.optimizer.param_groups[0]["lr"])  # a device tensor under --cuda-graph: one read per epoch
    t0 = time.perf_counter()
    with sample_bar((steps - skip) * cfg.batch_size, f"epoch {epoch + 1}/{cfg.epochs}", s.main) as bar, _autocast(s):
        batches = data.train_batches(cfg.batch_size, gen, dist.rank, dist.world)
        if skip:  # drawn (the same augmentation draws) and dropped: the epoch goes on at the same batch
            batches = itertools.islice(batches, skip, None)
        after_step = _step_checkpoints(s, progress, epoch, steps, stopper) if cfg.checkpoint_every else None
        try:
            if s.trainer is not None:
                train_loss, train_acc, n_train = s.trainer.train_epoch(batches, bar)
            else:
                train_loss, train_acc, n_train = train_epoch(s.net, s.optimizer, batches, cfg.num_classes, bar, reduce,
                                                             totals=totals, after_step=after_step,
                                                             loss=cfg.loss_function())
        except Diverged:
            raise _diverged(s, epoch) from None
    if not math.isfinite(train_loss) or nonfinite_count(s.model.state_dict()):  # e.g. BatchNorm statistics
        raise _diverged(s, epoch)
    train_time = time.perf_counter() - t0
    if precise_bn:  # before the epoch is evaluated and saved (plif.train.precise_bn)
        with _autocast(s):
            reestimate_bn(s.model, data.eval_batches(data.train, cfg.eval_batch_size, dist.rank, dist.world), reduce,
                          dist.world)
    rates = None
    # spike counts by forward hooks: a replayed CUDA graph runs none, and adding them to a compiled
    # network each epoch would make it recompile
    if s.trainer is None and not s.cfg.compile:
        with firing_rates(s.model, reduce) as rates:
            test_loss, test_acc, _ = _evaluate(s, data.test, "test", reduce)
    else:
        test_loss, test_acc, _ = _evaluate(s, data.test, "test", reduce)
    row = {"epoch": epoch + 1, "lr": lr, "train_loss": train_loss, "train_acc": train_acc,
           "test_loss": test_loss, "test_acc": test_acc}
    if data.val is not None:
        row["val_loss"], row["val_acc"], _ = _evaluate(s, data.val, "validation", reduce)
    row.update({"taus": layer_taus(s.model), "epoch_time_s": time.perf_counter() - t0, "train_time_s": train_time,
                "samples_per_s": n_train / train_time if train_time > 0 else float("nan")})
    if precise_bn:
        row["bn_reestimated"] = True
    if rates is not None:
        row["firing_rates"] = rates  # on the whole test set, every process's share (layer names as in TensorBoard)
    return row


def _step_checkpoints(s: Session, progress: Progress, epoch: int, steps: int, stopper: Stopper):
    """``train_epoch``'s ``after_step`` for ``--checkpoint-every``: every that many steps (not the
    epoch's last, which the epoch's checkpoint covers) rank 0 writes ``last.pt`` with the step and
    every rank's RNG states and partial totals; then the run stops there if it should."""
    every = s.cfg.checkpoint_every

    def after_step(t: EpochTotals) -> None:
        if t.steps % every or t.steps >= steps:
            return
        bad = not bool(t.finite) or (s.main and nonfinite_count(s.model.state_dict()) > 0)  # BN statistics too
        if any_rank(bad, s.device, s.dist.world):  # never save non-finite weights
            raise Diverged(f"the loss or a parameter became NaN or infinite (seen at step {t.steps})")
        ranks = all_gather_object({"rng": rng_state(s.device), "totals": t.state_dict()}, s.dist.world)
        if s.main:
            save_checkpoint(s.folder.checkpoint("last"),
                            {**resume_state(s, epoch, progress.metrics), "step": t.steps, "ranks": ranks})
        reason = _stop_reason(s, stopper)
        if reason:
            raise _StopNow(reason)

    return after_step


def _autocast(s: Session):
    """``--amp`` around the eager step and evaluation (the graph trainer applies it itself)."""
    return autocast_context(s.device, None if s.trainer is not None else s.cfg.amp)


def _evaluate(s: Session, split, name: str, reduce):
    shard = len(split) // s.dist.world
    batches = s.data.eval_batches(split, s.cfg.eval_batch_size, s.dist.rank, s.dist.world)
    if s.trainer is not None:
        return s.trainer.evaluate(batches, s.cfg.eval_batch_size)
    with sample_bar(shard, name, s.main) as bar, _autocast(s):
        return evaluate(s.net, batches, s.cfg.num_classes, reduce, progress=bar, loss=s.cfg.loss_function())


def _save_epoch(s: Session, progress: Progress, row: dict) -> None:
    """Write the epoch's checkpoints, metrics and summary (``progress``: the run before it); the
    caller then counts the epoch as finished, so if a write fails (a full disk), the summary written
    on the way out names no epoch whose files were not all written."""
    metrics, folder = [*progress.metrics, row], s.folder
    weights = {"model": s.model.state_dict(), "epoch": row["epoch"], "config": s.cfg_dict}
    if row["test_acc"] > progress.best("test_acc"):
        save_checkpoint(folder.checkpoint("best_test"), {**weights, "test_acc": row["test_acc"]})
    if "val_acc" in row and row["val_acc"] > progress.best("val_acc"):
        save_checkpoint(folder.checkpoint("best_val"), {**weights, "val_acc": row["val_acc"], "test_acc": row["test_acc"]})
    folder.write_metrics(metrics)
    save_checkpoint(folder.checkpoint("last"), resume_state(s, row["epoch"], metrics))
    folder.write_summary(run_summary(metrics, s.cfg, folder.path, finished=False))
