"""``last.pt``, what a run continues from: what it holds, and a session restored from it.

``last.pt`` holds the model, optimiser and schedule, the epoch, the config and a copy of the
metrics (``metrics.jsonl`` is rebuilt from it when damaged); one written every
``--checkpoint-every`` steps also holds the step and every rank's RNG states and partial totals.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ..runs.checkpoint import check_finite, load_checkpoint
from ..runs.folder import read_metrics
from .config import config_diff

if TYPE_CHECKING:
    from .session import Session

__all__ = ["restore", "resume_state", "rng_state", "set_rng_state"]


def resume_state(s: "Session", epoch: int, metrics: list[dict]) -> dict:
    """``last.pt`` after ``epoch`` epochs: everything a resume needs, with a copy of the metrics."""
    return {"model": s.model.state_dict(), "optimizer": s.optimizer.state_dict(),
            "scheduler": s.scheduler.state_dict(), "epoch": epoch, "config": s.cfg_dict, "best": {},
            "metrics": metrics}


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


def restore(s: "Session", log) -> None:
    """Load ``last.pt`` into the model, optimiser and schedule; refuse a different config."""
    state = load_checkpoint(s.folder.checkpoint("last"), map_location=s.device)
    check_finite(state, s.folder.checkpoint("last"))  # a NaN last.pt is nothing to continue from
    missing = [k for k in ("optimizer", "scheduler", "epoch") if not isinstance(state.get(k), dict if k != "epoch" else int)]
    step = state.get("step", 0)  # a --checkpoint-every checkpoint: steps done of epoch "epoch" + 1
    if missing or isinstance(state["epoch"], bool) or state["epoch"] < (0 if step else 1):
        raise ValueError(f"{s.folder.checkpoint('last')}: not a plif resume checkpoint "
                         f"({', '.join(missing) or 'epoch'} missing or malformed; nothing was changed)")
    diffs = config_diff(state["config"], s.cfg_dict)
    if diffs:
        raise ValueError(f"--resume: {s.folder.path} was started with a different config:\n" + "\n".join(diffs))
    ranks = state.get("ranks")
    if step and (not isinstance(ranks, list) or len(ranks) != s.dist.world):
        raise ValueError(f"--resume: {s.folder.checkpoint('last')} was saved in the middle of epoch "
                         f"{state['epoch'] + 1} by {len(ranks or ())} processes; resume it with as many "
                         f"(now {s.dist.world})")
    s.model.load_state_dict(state["model"])
    s.optimizer.load_state_dict(state["optimizer"])
    s.scheduler.load_state_dict(state["scheduler"])
    s.start_epoch, s.start_step = state["epoch"], step
    s.rank_state = ranks[s.dist.rank] if step else None
    s.metrics = _resumed_metrics(s, state, log)
    if s.main:
        where = f"at step {step} of epoch {s.start_epoch + 1}" if step else f"after epoch {s.start_epoch}"
        log(f"resuming {s.folder.path} {where}")


def _resumed_metrics(s: "Session", state: dict, log) -> list[dict]:
    """The rows of epochs 1..E of a resume after epoch E: from ``metrics.jsonl``, or, when that is
    damaged or short, from the copy ``last.pt`` keeps (and ``metrics.jsonl`` is rewritten); refused
    naming the file when neither has them all."""
    last, notes = s.folder.checkpoint("last"), []
    want = list(range(1, s.start_epoch + 1))
    rows = [m for m in read_metrics(s.folder.path, notes) if isinstance(m.get("epoch"), int) and m["epoch"] <= s.start_epoch]
    if [m["epoch"] for m in rows] == want:
        return rows
    saved = state.get("metrics")
    if isinstance(saved, list) and [m.get("epoch") if isinstance(m, dict) else None for m in saved] == want:
        if s.main:
            s.folder.write_metrics(saved)
            log(f"{s.folder.metrics} was damaged or short ({'; '.join(notes) or f'{len(rows)} of {len(want)} epochs'}); "
                f"rewrote it from the copy in {last}")
        return list(saved)
    raise ValueError(f"--resume: {s.folder.metrics} records epochs {[m['epoch'] for m in rows]} but {last} is after "
                     f"epoch {s.start_epoch}" + (f" ({'; '.join(notes)})" if notes else "")
                     + "; nothing was changed; put metrics.jsonl back, or pass --restart to delete this run and "
                     "train from scratch")
