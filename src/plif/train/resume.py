"""``last.pt``, what a run continues from: what it holds, and a session restored from it.

``last.pt`` holds the model, optimiser and schedule, the epoch, the config and a copy of the
metrics (``metrics.jsonl`` is rebuilt from it when damaged); one written every
``--checkpoint-every`` steps also holds the step and every rank's RNG states and partial totals.

A resume may change ``--epochs``.  Where the cosine period follows the epochs (the ``cpu``
preset's default, ``t_max`` equal to the run's epochs), it follows the new number: the schedule
is stretched (or shrunk) to end at the new last epoch, and the learning rate goes on from the
stretched curve's value at the epoch reached (it would otherwise train the new epochs from lr 0).
A period of its own (the paper's 64, or a ``--t-max`` other than the epochs) stays.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass

import torch

from ..runs.checkpoint import check_finite, load_checkpoint
from ..runs.folder import read_metrics
from .checks import idle_settings
from .config import ABSENT_MEANS, PRESETS, TrainConfig
from .distributed import DistInfo
from .state import Progress, Session

__all__ = ["restore", "Restored", "resume_state", "rng_state", "set_rng_state", "config_diff", "RESUMABLE_CHANGES"]

# Settings that may change when a run is resumed: how long it trains, and where and how it runs, logs and is
# checkpointed; none changes what it computes beyond rounding (another device, backend, compile, memory or
# TF32 may round differently).
RESUMABLE_CHANGES = ("epochs", "device", "out", "eval_batch_size", "data_on_device", "log", "cuda_graph", "compile",
                     "memory", "checkpoint_blocks", "backend", "tf32", "time_limit", "checkpoint_every")


def config_diff(old: dict, new: dict) -> list[str]:
    """Human-readable differences between two resolved configs that forbid a resume: of what has an
    effect (:func:`_in_effect`)."""
    diffs = []
    old, new = _in_effect(old), _in_effect(new)
    for key in sorted(set(old) | set(new)):
        if key in RESUMABLE_CHANGES or key in ("network_kwargs", "speed_auto", "kernel_checks"):
            continue
        if key == "model_sha256" and key not in old:  # a run made before it was recorded
            continue
        a, b = old.get(key, ABSENT_MEANS.get(key)), new.get(key, ABSENT_MEANS.get(key))
        if json.dumps(a) != json.dumps(b):
            diffs.append(f"  {key}: run has {a!r}, now {b!r}")
    return diffs


def _in_effect(d: dict) -> dict:
    """A config with the settings that have no effect in it at their defaults
    (:func:`plif.train.checks.idle_settings`: runs made before those were refused kept them)."""
    return {**d, **{key: default for key, (default, _) in idle_settings(TrainConfig, d).items() if key in d}}


@dataclass(frozen=True)
class Restored:
    """What :func:`restore` read from ``last.pt`` beside the states it loaded into the model,
    optimiser and schedule: the run's config (the cosine period may follow new ``--epochs``) and
    where it goes on (:class:`plif.train.state.Progress`: the rows of epochs 1..E, and for a
    mid-epoch checkpoint the step and this rank's RNG states and partial totals)."""

    cfg: TrainConfig
    progress: Progress


def resume_state(s: Session, epoch: int, metrics) -> dict:
    """``last.pt`` after ``epoch`` epochs: everything a resume needs, with a copy of the metrics."""
    return {"model": s.model.state_dict(), "optimizer": s.optimizer.state_dict(),
            "scheduler": s.scheduler.state_dict(), "epoch": epoch, "config": s.cfg_dict, "best": {},
            "metrics": list(metrics)}


def rng_state(device: torch.device) -> dict:
    """This process's RNG states (CPU, and the device's on CUDA), for a mid-epoch checkpoint."""
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: dict, device: torch.device) -> None:
    torch.set_rng_state(state["cpu"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def restore(folder, cfg: TrainConfig, cfg_dict: dict, model, optimizer, scheduler, device: torch.device,
            dist: DistInfo, log) -> Restored:
    """Load ``last.pt`` of run ``folder`` into ``model``, ``optimizer`` and ``scheduler``; refuse a
    config (``cfg``, recorded as ``cfg_dict``) that differs from the run's.  Returns what else it read."""
    main = dist.is_main
    last = folder.checkpoint("last")
    state = load_checkpoint(last, map_location=device)
    check_finite(state, last)  # a NaN last.pt is nothing to continue from
    missing = [k for k in ("optimizer", "scheduler", "epoch") if not isinstance(state.get(k), dict if k != "epoch" else int)]
    step = state.get("step", 0)  # a --checkpoint-every checkpoint: steps done of epoch "epoch" + 1
    if missing or isinstance(state["epoch"], bool) or state["epoch"] < (0 if step else 1):
        raise ValueError(f"{last}: not a plif resume checkpoint "
                         f"({', '.join(missing) or 'epoch'} missing or malformed; nothing was changed)")
    stored = state["config"] if isinstance(state["config"], dict) else {}  # {}: every setting differs
    period = _carried_period(stored, cfg)
    if period is not None:
        cfg, cfg_dict = dataclasses.replace(cfg, t_max=period), {**cfg_dict, "t_max": period}
        stored = {**stored, "t_max": period}
    diffs = config_diff(stored, cfg_dict)
    if diffs:
        raise ValueError(f"--resume: {folder.path} was started with a different config:\n" + "\n".join(diffs))
    ranks = state.get("ranks")
    if step and (not isinstance(ranks, list) or len(ranks) != dist.world):
        raise ValueError(f"--resume: {last} was saved in the middle of epoch "
                         f"{state['epoch'] + 1} by {len(ranks or ())} processes; resume it with as many "
                         f"(now {dist.world})")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    if period is not None and scheduler.T_max != period:
        _stretch_schedule(scheduler, period)
        if main:
            log(f"--epochs {cfg.epochs} (the run had {state['config']['epochs']}): the cosine period follows "
                f"the epochs, now {period}; the learning rate goes on at {scheduler.get_last_lr()[0]:.3g}")
    epoch = state["epoch"]
    metrics = _resumed_metrics(folder, main, epoch, state, log)
    if main:
        where = f"at step {step} of epoch {epoch + 1}" if step else f"after epoch {epoch}"
        log(f"resuming {folder.path} {where}")
    return Restored(cfg, Progress(tuple(metrics), step, ranks[dist.rank] if step else None))


def _carried_period(stored: dict, cfg) -> int | None:
    """The new cosine period when the run's followed its epochs and ``--epochs`` changed (None
    otherwise): ``t_max`` equal to the epochs under a preset that sets no period of its own, and
    not given anew (the stored one, or the new epochs as :func:`resolve_config` gives it)."""
    preset = PRESETS.get(stored.get("preset"), {})
    epochs, t_max = stored.get("epochs"), stored.get("t_max")
    if "t_max" in preset or not isinstance(epochs, int) or t_max != epochs or cfg.epochs == epochs or cfg.t_max not in (t_max, cfg.epochs):
        return None
    return cfg.epochs


def _stretch_schedule(scheduler, period: int) -> None:
    """Give a cosine schedule a new period, with the learning rate of every group set to the
    closed form at the epoch reached (where torch's per-epoch recursion goes on from)."""
    scheduler.T_max = period
    t, lrs = scheduler.last_epoch, []
    for group, base in zip(scheduler.optimizer.param_groups, scheduler.base_lrs):
        if hasattr(scheduler, "lr_at"):  # --warmup-epochs (plif.train.optim.WarmupCosineLR)
            lr = float(scheduler.lr_at(base, t))
        else:
            lr = scheduler.eta_min + (base - scheduler.eta_min) * (1 + math.cos(math.pi * t / period)) / 2
        if torch.is_tensor(group["lr"]):
            group["lr"].fill_(lr)  # --cuda-graph: the captured step reads this tensor
        else:
            group["lr"] = lr
        lrs.append(lr)
    scheduler._last_lr = lrs


def _resumed_metrics(folder, main: bool, epoch: int, state: dict, log) -> list[dict]:
    """The rows of epochs 1..E of a resume after epoch E (``epoch``): from ``metrics.jsonl``, or, when that is
    damaged or short, from the copy ``last.pt`` keeps.  A damaged file (also a torn line after the
    rows the resume needs, as a finished run may have) is rewritten and the log says so; refused
    naming the file when neither has them all."""
    last, notes = folder.checkpoint("last"), []
    want = list(range(1, epoch + 1))
    rows = [m for m in read_metrics(folder.path, notes) if isinstance(m.get("epoch"), int) and m["epoch"] <= epoch]
    complete = [m["epoch"] for m in rows] == want
    if complete and not notes:
        return rows
    saved = state.get("metrics")
    if isinstance(saved, list) and [m.get("epoch") if isinstance(m, dict) else None for m in saved] == want:
        good, source = list(saved), f"the copy in {last}"
    elif complete:
        good, source = rows, f"its rows of epochs 1 to {epoch}, which {last} follows"
    else:
        raise ValueError(f"--resume: {folder.metrics} records epochs {[m['epoch'] for m in rows]} but {last} is "
                         f"after epoch {epoch}" + (f" ({'; '.join(notes)})" if notes else "")
                         + "; nothing was changed; put metrics.jsonl back, or pass --restart to delete this run and "
                         "train from scratch")
    if main:
        folder.write_metrics(good)
        log(f"{folder.metrics} was damaged or short ({'; '.join(notes) or f'{len(rows)} of {len(want)} epochs'}); "
            f"rewrote it from {source}")
    return good
