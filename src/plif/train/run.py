"""``train(config)``: the paper's protocol end to end, in one locked run folder, resumable.

The run folder's format is :mod:`plif.train.run_folder`.  ``train`` is a list of set-up steps
(config, run folder, model, optimiser and schedule, data) followed by a short loop, in the manner
of torchtune's single-device recipes.  Every value is validated and the run folder is locked
before any data is loaded.

Every epoch ends with an atomic ``last.pt``; everything random in an epoch is seeded from
``(seed, epoch)``, so on CPU a run killed at any point and resumed ends bit-for-bit where an
uninterrupted run does.  A run with no finished epoch is simply started again.  Non-finite
weights are never written: a diverged epoch stops the run and the last good checkpoint stays.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import torch

from ..models import build_network
from ..progress import sample_bar
from .checkpoint import check_finite, load_checkpoint, save_checkpoint
from .config import TrainConfig, check_network, check_outputs, config_diff, pick_device, resolve_config
from .data import epoch_generator, load_train_data
from .distributed import all_reduce_sum, init_distributed, shutdown
from .graph import GraphTrainer, autocast_context, check_graph_options, graph_adam
from .loop import Diverged, adam, evaluate, nonfinite_count, train_epoch
from .run_folder import CHECKPOINT_DIR, CHECKPOINTS, RunFolder, prepare_out, read_metrics

__all__ = ["train", "default_run_dir", "read_metrics"]


def default_run_dir(cfg: TrainConfig) -> Path:
    """``runs/<dataset>-<timestamp>``; the name is only a label, config.json says what ran."""
    return Path("runs") / f"{cfg.dataset}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


@dataclass
class _Session:
    """What the set-up steps produce and the loop uses."""

    cfg: TrainConfig
    cfg_dict: dict
    folder: RunFolder
    device: torch.device
    dist: object
    main: bool
    resume: bool
    model: torch.nn.Module = None
    net: torch.nn.Module = None
    optimizer: torch.optim.Optimizer = None
    scheduler: object = None
    data: object = None
    start_epoch: int = 0
    metrics: list = None
    tb: object = None
    trainer: GraphTrainer | None = None  # --cuda-graph: the captured step and evaluation
    undo: object = None  # a fresh run's clean-up while it has finished no epoch: no stub folder stays


# --- set-up steps ------------------------------------------------------------------------------

def setup_run_folder(cfg: TrainConfig, resume: bool, main: bool, log,
                     restart: bool = False) -> tuple[RunFolder, bool, list]:
    """Check ``--out`` can be written, lock it, clean what a killed run left, decide fresh or resume.

    Returns ``(locked folder, resume, folders created)``; ``resume`` is False when the folder has
    no finished epoch (such a run starts again, with or without ``--resume``).  A folder recording
    finished epochs is never cleared without ``restart``: it is resumed from ``last.pt`` or refused
    with a message naming what is missing.
    """
    folder = RunFolder(cfg.out or default_run_dir(cfg))
    if not main:
        return folder, resume and folder.has_finished_epoch(), []
    if restart and resume:
        raise ValueError("--restart deletes the run in --out and --resume continues it: give one of them")
    created = prepare_out(folder.path)
    folder.refuse_links()
    folder.lock()
    try:
        folder.refuse_links()  # again under the lock: the state is only read now
        folder.clean_stale_temporaries()
        if restart:
            gone = folder.delete_run()
            if gone:
                log(f"--restart: deleted {', '.join(gone)} in {folder.path}")
        records, finished = folder.epoch_records(), folder.has_finished_epoch()
        if resume and not records and not folder.has_config():
            raise FileNotFoundError(f"--resume: {folder.path} holds no run (no config.json)")
        if records and not finished:
            raise ValueError(f"{folder.path}: {', '.join(records)} record finished epochs, but "
                             f"{CHECKPOINT_DIR}/{CHECKPOINTS['last']} (what a run continues from) is missing; nothing "
                             "was changed; put it back to --resume, pass --restart to delete this run and train "
                             "from scratch, or choose another --out")
        if not resume and finished:
            raise ValueError(f"{folder.path} already holds a run; pass --resume to continue it, --restart to delete "
                             "it and train from scratch, or choose another --out")
        if not finished and folder.has_config():
            log(f"{folder.path}: the run there finished no epoch; starting it again")
            folder.clear_unfinished()
    except BaseException:
        folder.unlock()
        raise
    return folder, resume and finished, created


def setup_model(cfg: TrainConfig, device: torch.device) -> torch.nn.Module:
    """The network, seeded, on ``device``; its output width must equal the dataset's classes."""
    torch.manual_seed(cfg.seed)
    model = build_network(cfg.network, cfg.input_shape, cfg.T, **cfg.network_kwargs())
    check_outputs(model, cfg)
    model.set_memory(cfg.memory_options())  # --memory / --checkpoint-blocks: what backward keeps
    return model.to(device)


def setup_optimizer(model, cfg: TrainConfig, device: torch.device):
    """Adam (the paper's, no weight decay) and cosine annealing with period ``t_max`` epochs.

    Under ``--cuda-graph`` Adam is capturable and its learning rate a device tensor."""
    optimizer = graph_adam(model.parameters(), cfg.lr, device) if cfg.cuda_graph else adam(model.parameters(), cfg.lr)
    return optimizer, torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=cfg.t_max)


def restore(s: _Session, log) -> None:
    """Load ``last.pt`` into the model, optimiser and schedule; refuse a different config."""
    state = load_checkpoint(s.folder.checkpoint("last"), map_location=s.device)
    check_finite(state, s.folder.checkpoint("last"))  # a NaN last.pt is nothing to continue from
    missing = [k for k in ("optimizer", "scheduler", "epoch") if not isinstance(state.get(k), dict if k != "epoch" else int)]
    if missing or isinstance(state["epoch"], bool) or state["epoch"] < 1:
        raise ValueError(f"{s.folder.checkpoint('last')}: not a plif resume checkpoint "
                         f"({', '.join(missing) or 'epoch'} missing or malformed; nothing was changed)")
    diffs = config_diff(state["config"], s.cfg_dict)
    if diffs:
        raise ValueError(f"--resume: {s.folder.path} was started with a different config:\n" + "\n".join(diffs))
    s.model.load_state_dict(state["model"])
    s.optimizer.load_state_dict(state["optimizer"])
    s.scheduler.load_state_dict(state["scheduler"])
    s.start_epoch = state["epoch"]
    s.metrics = _resumed_metrics(s, state, log)
    if s.main:
        log(f"resuming {s.folder.path} after epoch {s.start_epoch}")


def _resumed_metrics(s: _Session, state: dict, log) -> list[dict]:
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


def setup_parallel(s: _Session) -> torch.nn.Module:
    """The module the loop runs: SyncBN / DDP / torch.compile around the model as configured."""
    net = s.model
    if s.cfg.sync_bn and s.device.type != "cuda":
        raise ValueError("--sync-bn needs CUDA devices (PyTorch's SyncBatchNorm has no CPU implementation)")
    if s.cfg.sync_bn and s.dist.world > 1:
        net = torch.nn.SyncBatchNorm.convert_sync_batchnorm(net)
    if s.dist.world > 1:
        net = torch.nn.parallel.DistributedDataParallel(
            net, device_ids=[s.device.index] if s.device.type == "cuda" else None)
    if s.cfg.compile:
        net = torch.compile(net)
    return net


def _setup(cfg: TrainConfig, resume: bool, log, restart: bool = False) -> _Session:
    cfg = resolve_config(cfg)
    check_network(cfg)  # built on the meta device: a bad network is refused before the folder is touched
    device = pick_device(cfg.device)
    dist = init_distributed(device.type)
    if dist.world > 1 and device.type == "cuda":
        device = torch.device("cuda", dist.local_rank)
        torch.cuda.set_device(device)
    check_graph_options(device, cfg.cuda_graph, cfg.amp, cfg.compile, dist.world)  # before the folder is touched
    if cfg.log == "tensorboard":
        from .tb_log import summary_writer_class

        summary_writer_class()  # missing package: refused before the run folder is touched
    folder, resume, created = setup_run_folder(cfg, resume, dist.is_main, log, restart)
    s = _Session(cfg, {**cfg.to_dict(), "out": str(folder.path)}, folder, device, dist, dist.is_main, resume,
                 metrics=[])
    new_tensorboard = not folder.tensorboard.exists()
    if s.main and not resume:
        s.undo = lambda: folder.discard_new(created, new_tensorboard)
    try:
        if s.main and not resume:
            folder.write_config(s.cfg_dict)  # before the data loads: a full disk fails now
            folder.write_metrics([])
        s.model = setup_model(cfg, device)
        s.optimizer, s.scheduler = setup_optimizer(s.model, cfg, device)
        if resume:
            restore(s, log)
            if s.main:
                folder.write_config(s.cfg_dict)  # what a resume may change (--epochs, --device) is recorded
        if s.main and cfg.log == "tensorboard":
            from .tb_log import TensorBoardLog

            s.tb = TensorBoardLog(folder.tensorboard)
        s.data = load_train_data(cfg, device)
        if s.data.steps_per_epoch(cfg.batch_size, dist.world) == 0:
            raise ValueError(f"--batch-size {cfg.batch_size}: larger than the {len(s.data.train)} training samples"
                             + (f" per process ({dist.world} processes)" if dist.world > 1 else "")
                             + "; lower --batch-size" + (" or --val-split" if cfg.val_split else ""))
        s.net = setup_parallel(s)
        if cfg.cuda_graph:  # captured lazily, after any resume has loaded the state it replays on
            s.trainer = GraphTrainer(s.model, s.optimizer, cfg.num_classes, device, amp=cfg.amp)
    except BaseException:
        if s.tb is not None:
            s.tb.close()
        if s.undo is not None:  # a refused fresh run leaves no stub run folder behind
            s.undo()
        folder.unlock()
        raise
    return s


# --- the loop ----------------------------------------------------------------------------------

def train(cfg: TrainConfig, resume: bool = False, log=print, restart: bool = False) -> Path:
    """Train with ``cfg`` (validated and resolved here); returns the run folder.

    resume: continue the run in ``cfg.out`` from its ``last.pt``; refuses when the stored config
    differs in anything but the number of epochs, the device or logging.
    restart: delete the run already in ``cfg.out`` (config, metrics, summary, checkpoints,
    TensorBoard logs) and train from scratch; without it a finished epoch is never deleted.
    """
    s = _setup(cfg, resume, log, restart)
    cfg, folder = s.cfg, s.folder
    reduce = all_reduce_sum if s.dist.world > 1 else None
    steps = s.data.steps_per_epoch(cfg.batch_size, s.dist.world)
    finished = True
    try:
        if s.main:
            log(f"run folder: {folder.path}")
            log(f"{cfg.dataset}: {len(s.data.train)} train, {len(s.data.val) if s.data.val else 0} val, "
                f"{len(s.data.test)} test samples on {s.device}; network {cfg.network}, T={cfg.T}, "
                f"every neuron {_neuron_label(cfg)}" + (f", {cfg.pool} pooling" if cfg.pool else ""))
        for epoch in range(s.start_epoch, cfg.epochs):
            row, rates = _run_epoch(s, epoch, steps, reduce)
            s.scheduler.step()
            if s.main:
                _save_epoch(s, row)  # appends the row once everything of the epoch is written
            else:
                s.metrics.append(row)
            if s.main:
                if s.tb is not None:
                    s.tb.epoch(row, rates)
                log(_epoch_line(row, cfg))
    except KeyboardInterrupt:
        finished = False
        if s.main and s.metrics:
            log(f"\ninterrupted; the last complete epoch is saved in {folder.checkpoint('last')} "
                f"(continue with --resume --out {folder.path})")
        elif s.main:
            log("\ninterrupted before the first epoch finished; nothing was kept")
        raise
    except BaseException:
        finished = False
        raise
    finally:
        if s.tb is not None:
            s.tb.close()
            s.tb = None
        if s.main and not s.metrics and s.undo is not None and not finished:
            s.undo()  # a fresh run that finished no epoch (diverged, interrupted) leaves no stub
        if s.main and s.metrics:
            try:
                folder.write_summary(_summary(s.metrics, cfg, folder.path, finished and len(s.metrics) == cfg.epochs))
            except OSError:
                if finished:
                    raise  # otherwise the error already on its way (e.g. the same full disk) is the one to report
        folder.unlock()
        shutdown()
    if s.main:
        log(_final_report(folder, s.metrics, cfg))
    return folder.path


def _diverged(s: _Session, epoch: int) -> FloatingPointError:
    last = s.folder.checkpoint("last")
    if epoch > 0 and last.is_file():  # a resume refuses a non-finite last.pt, so this one is good
        good = f"the last good checkpoint is {last} (epoch {epoch}); lower --lr and --resume, or start again"
    elif epoch > 0:
        good = f"{last} is missing, so there is nothing to resume; lower --lr and start again (--restart)"
    else:
        good = "no epoch finished, so no checkpoint was written; lower --lr and start again"
    return Diverged(f"training diverged in epoch {epoch + 1}: the loss or the weights became NaN or infinite; "
                    f"stopped without saving them; {good}")


def _run_epoch(s: _Session, epoch: int, steps: int, reduce) -> tuple[dict, dict | None]:
    cfg, data, dist = s.cfg, s.data, s.dist
    gen = epoch_generator(cfg.seed, epoch)
    torch.manual_seed(cfg.seed * 7919 + epoch * 104729 + dist.rank)  # dropout masks
    lr = float(s.optimizer.param_groups[0]["lr"])  # a device tensor under --cuda-graph: one read per epoch
    t0 = time.perf_counter()
    with sample_bar(steps * cfg.batch_size, f"epoch {epoch + 1}/{cfg.epochs}", s.main) as bar, _autocast(s):
        batches = data.train_batches(cfg.batch_size, gen, dist.rank, dist.world)
        try:
            if s.trainer is not None:
                train_loss, train_acc, n_train = s.trainer.train_epoch(batches, bar)
            else:
                train_loss, train_acc, n_train = train_epoch(s.net, s.optimizer, batches, cfg.num_classes, bar, reduce)
        except Diverged:
            raise _diverged(s, epoch) from None
    if not math.isfinite(train_loss) or nonfinite_count(s.model.state_dict()):  # e.g. BatchNorm statistics
        raise _diverged(s, epoch)
    train_time = time.perf_counter() - t0
    rates = None
    if s.tb is not None:
        from .tb_log import firing_rates

        with firing_rates(s.model) as rates:
            test_loss, test_acc, _ = _evaluate(s, data.test, "test", reduce)
    else:
        test_loss, test_acc, _ = _evaluate(s, data.test, "test", reduce)
    row = {"epoch": epoch + 1, "lr": lr, "train_loss": train_loss, "train_acc": train_acc,
           "test_loss": test_loss, "test_acc": test_acc}
    if data.val is not None:
        _, row["val_acc"], _ = _evaluate(s, data.val, "validation", reduce)
    taus = [float(m.tau.mean()) for m in s.model.neuron_layers() if hasattr(m, "w")]
    row.update({"taus": taus, "epoch_time_s": time.perf_counter() - t0, "train_time_s": train_time,
                "samples_per_s": n_train / train_time if train_time > 0 else float("nan")})
    return row, rates


def _autocast(s: _Session):
    """``--amp`` around the eager step and evaluation (the graph trainer applies it itself)."""
    return autocast_context(s.device, None if s.trainer is not None else s.cfg.amp)


def _evaluate(s: _Session, split, name: str, reduce):
    shard = len(split) // s.dist.world
    batches = s.data.eval_batches(split, s.cfg.eval_batch_size, s.dist.rank, s.dist.world)
    if s.trainer is not None:
        return s.trainer.evaluate(batches, s.cfg.eval_batch_size)
    with sample_bar(shard, name, s.main) as bar, _autocast(s):
        return evaluate(s.net, batches, s.cfg.num_classes, reduce, progress=bar)


def _neuron_label(cfg: TrainConfig) -> str:
    if cfg.neuron == "if":
        return "IF"
    return f"{cfg.neuron.upper()} (tau{'0' if cfg.neuron == 'plif' else ''} = {cfg.tau0:g})"


def _resume_state(s: _Session, epoch: int, metrics: list[dict]) -> dict:
    """``last.pt``: everything a resume needs, with a copy of the metrics (metrics.jsonl can be
    rebuilt from it when damaged)."""
    return {"model": s.model.state_dict(), "optimizer": s.optimizer.state_dict(),
            "scheduler": s.scheduler.state_dict(), "epoch": epoch, "config": s.cfg_dict, "best": {},
            "metrics": metrics}


def _save_epoch(s: _Session, row: dict) -> None:
    """Write the epoch's checkpoints, metrics and summary, then record ``row`` in ``s.metrics``:
    if a write fails (a full disk), the summary written on the way out names no epoch whose files
    were not all written."""
    metrics, folder = [*s.metrics, row], s.folder
    weights = {"model": s.model.state_dict(), "epoch": row["epoch"], "config": s.cfg_dict}
    if row["test_acc"] > max((m["test_acc"] for m in metrics[:-1]), default=-1.0):
        save_checkpoint(folder.checkpoint("best_test"), {**weights, "test_acc": row["test_acc"]})
    if "val_acc" in row and row["val_acc"] > max((m["val_acc"] for m in metrics[:-1]), default=-1.0):
        save_checkpoint(folder.checkpoint("best_val"), {**weights, "val_acc": row["val_acc"], "test_acc": row["test_acc"]})
    folder.write_metrics(metrics)
    save_checkpoint(folder.checkpoint("last"), _resume_state(s, row["epoch"], metrics))
    folder.write_summary(_summary(metrics, s.cfg, folder.path, finished=False))
    s.metrics.append(row)


def _summary(metrics: list[dict], cfg: TrainConfig, run_dir: Path, finished: bool) -> dict:
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


def _epoch_line(row: dict, cfg: TrainConfig) -> str:
    val = f"  val {row['val_acc']:.2%}" if "val_acc" in row else ""
    taus = ", ".join(f"{t:.3g}" for t in row["taus"])
    return (f"epoch {row['epoch']:>4}/{cfg.epochs}  loss {row['train_loss']:.4f}  train {row['train_acc']:.2%}  "
            f"test {row['test_acc']:.2%}{val}  lr {row['lr']:.2e}  {row['samples_per_s']:.0f} samples/s  "
            f"{row['epoch_time_s']:.1f}s  tau [{taus}]")


def _final_report(folder: RunFolder, metrics: list[dict], cfg: TrainConfig) -> str:
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
