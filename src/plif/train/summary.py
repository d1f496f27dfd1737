"""What a run reports: its opening lines, one line per epoch, ``summary.json`` (accuracy A and B)
and the closing report."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..runs.folder import CHECKPOINT_DIR, CHECKPOINTS, RunFolder
from ..models.structure import spec_as_built
from ..surrogate import unless_paper
from .config import TrainConfig

if TYPE_CHECKING:
    from .state import Session

__all__ = ["run_summary", "epoch_line", "start_lines", "final_report", "LINE_WIDTH"]


def run_summary(metrics: list[dict], cfg: TrainConfig, run_dir: Path, finished: bool) -> dict:
    """``summary.json`` of the epochs in ``metrics``: accuracy A (max test accuracy) and, with a
    validation split, B (the test accuracy at the best validation accuracy), each with its epoch
    and checkpoint; ties go to the earlier epoch."""
    best_a = max(metrics, key=lambda m: (m["test_acc"], -m["epoch"]))
    out = {
        "dataset": cfg.dataset, "preset": cfg.preset, "epochs_run": len(metrics), "epochs": cfg.epochs,
        "finished": finished,
        "accuracy_A": {"test_acc": best_a["test_acc"], "epoch": best_a["epoch"],
                       "checkpoint": _written(run_dir, "best_test")},
        "taus": metrics[-1]["taus"],
        "wall_time_s": sum(m["epoch_time_s"] for m in metrics),
    }
    if cfg.val_split > 0:
        best_b = max(metrics, key=lambda m: (m["val_acc"], -m["epoch"]))
        out["accuracy_B"] = {"test_acc": best_b["test_acc"], "val_acc": best_b["val_acc"],
                             "epoch": best_b["epoch"],
                             "checkpoint": _written(run_dir, "best_val")}
    return out


def _written(run_dir: Path, which: str) -> str | None:
    """The checkpoint's path relative to the run, or None when it was never written (or deleted)."""
    rel = Path(CHECKPOINT_DIR) / CHECKPOINTS[which]
    return str(rel) if (Path(run_dir) / rel).is_file() else None


def start_lines(s: "Session") -> list[str]:
    """Where the run is, what it trains on and with which network (and, under torchrun, where the data lives)."""
    cfg = s.cfg
    capped = (f" (--max-train-samples {cfg.max_train_samples} caps the pool --val-split is taken from)"
              if cfg.max_train_samples is not None and cfg.val_split > 0 else "")
    lines = [f"run folder: {s.folder.path}",
             f"{cfg.dataset}: {len(s.data.train)} train, {len(s.data.val) if s.data.val else 0} val{capped}, "
             f"{len(s.data.test)} test samples on {s.device}{_precision(cfg)}; "
             + (f"--model {cfg.model} ({type(s.model).__name__}), T={cfg.T}" if cfg.model is not None else
                f"network {spec_as_built(cfg.network, cfg.input_shape, cfg.neuron, cfg.pool)}, T={cfg.T}, "
                f"every neuron {_neuron_label(cfg)}" + (f", {cfg.pool} pooling" if cfg.pool else ""))]
    if s.dist.world > 1:
        lines.append(_placement(s))
    return lines


def _precision(cfg: TrainConfig) -> str:
    """`` in bf16`` when the run autocasts (``--amp auto`` does on a CPU with native bf16: a user sees it)."""
    return f" in {cfg.amp} (--amp none: fp32)" if cfg.amp else ""


def _neuron_label(cfg: TrainConfig) -> str:
    other = unless_paper(cfg.surrogate, " with the {} surrogate")
    if cfg.neuron == "if":
        return "IF" + other
    return f"{cfg.neuron.upper()} (tau{'0' if cfg.neuron == 'plif' else ''} = {cfg.tau0:g})" + other


def _placement(s: "Session") -> str:
    """What each of the processes holds of the data (``--data-on-device``)."""
    splits = [x for x in (s.data.train, s.data.val, s.data.test) if x is not None]
    mb = sum(x.nbytes for x in splits) / 1e6
    n = s.dist.world
    if not s.data.train.streamed:
        return f"data: each of the {n} processes keeps every split whole on its device ({mb:.0f} MB each)"
    source = ("the memory-mapped frame cache (pages shared by the processes of a machine)"
              if s.data_options.spec.is_event else f"host memory (every process holds the {mb:.0f} MB of uint8 images)")
    return (f"data: each of the {n} processes streams only its own 1/{n} of every epoch and evaluation, from {source}")


LINE_WIDTH = 100  # the epoch line fits a terminal of 100 columns


def epoch_line(row: dict, cfg: TrainConfig) -> str:
    """One line of at most :data:`LINE_WIDTH` characters: loss, accuracies, learning rate, the
    epoch's time and τ of every PLIF layer (their range where the list would not fit).  Samples/s
    and the rest are in ``metrics.jsonl``."""
    acc = " ".join(f"{name} {row[key]:.2%}" for name, key in (("train", "train_acc"), ("test", "test_acc"),
                                                              ("val", "val_acc")) if key in row)
    head = (f"epoch {row['epoch']:>{len(str(cfg.epochs))}}/{cfg.epochs} loss {row['train_loss']:.4f} {acc} "
            f"lr {row['lr']:.1e} {_duration(row['epoch_time_s'])}")
    taus = row["taus"]
    if not taus:
        return head
    listed = f"{head} tau {' '.join(map(_tau, taus))}"
    if len(listed) <= LINE_WIDTH or len(taus) == 1:
        return listed
    return f"{head} tau {_tau(min(taus))}-{_tau(max(taus))}"


def _tau(t: float) -> str:
    return f"{t:.2f}" if t < 100 else f"{t:.2g}"


def _duration(seconds: float) -> str:
    """At most five characters: ``12.3s``, ``45.6m``, ``12.3h``."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    return f"{seconds / 60:.1f}m" if seconds < 3600 else f"{seconds / 3600:.1f}h"


def final_report(folder: RunFolder, metrics: list[dict], cfg: TrainConfig) -> str:
    if not metrics:
        return f"no epoch run; run folder: {folder.path}"
    s = folder.read_summary()
    a = s["accuracy_A"]
    lines = [f"\n{cfg.dataset}, {len(metrics)} epochs in {s['wall_time_s']:.0f}s",
             f"accuracy A (max test): {a['test_acc']:.2%} at epoch {a['epoch']}"]
    if "accuracy_B" in s:
        b = s["accuracy_B"]
        lines.append(f"accuracy B (test at best val): {b['test_acc']:.2%} at epoch {b['epoch']} (val {b['val_acc']:.2%})")
    lines.append(f"run folder: {folder.path}")
    return "\n".join(lines)
