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

import dataclasses
import itertools
import math
import os
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import torch

from ..models import build_network
from ..progress import sample_bar
from .checkpoint import check_finite, load_checkpoint, save_checkpoint
from ..data.pipeline import epoch_generator, load_train_data, planned_train_samples
from .config import STATIC, TrainConfig, check_network, check_outputs, config_diff, pick_device, resolve_config
from .distributed import (all_gather_object, all_reduce_sum, any_rank, broadcast_object, init_distributed,
                          restart_count, shutdown)
from .graph import GraphTrainer, autocast_context, check_graph_options, graph_adam
from .loop import Diverged, EpochTotals, adam, evaluate, nonfinite_count, train_epoch
from .run_folder import CHECKPOINT_DIR, CHECKPOINTS, RunFolder, prepare_out, read_metrics
from .stopping import EXIT_STOPPED, Stopper, parse_duration

__all__ = ["train", "train_status", "default_run_dir", "read_metrics", "EXIT_STOPPED"]


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
    start_step: int = 0  # a mid-epoch checkpoint: steps of epoch start_epoch + 1 already done
    rank_state: dict | None = None  # ... and this rank's RNG states and partial totals then
    metrics: list = None
    tb: object = None
    trainer: GraphTrainer | None = None  # --cuda-graph: the captured step and evaluation
    undo: object = None  # a fresh run's clean-up while it has finished no epoch: no stub folder stays
    restarted: bool = False  # a group torchrun started again (--max-restarts)


# --- set-up steps ------------------------------------------------------------------------------

def setup_run_folder(cfg: TrainConfig, resume, log, restart: bool = False) -> tuple[RunFolder, bool, list]:
    """Check ``--out`` can be written, lock it, clean what a killed run left, decide fresh or resume.

    resume: True (``--resume``), False, or ``"auto"`` (``--time-limit``, a torchrun restart):
    continue the run there if it has a checkpoint, else start it.  Returns ``(locked folder,
    resume, folders created)``; ``resume`` is False when the folder has no checkpoint (such a run
    starts again).  A folder recording finished epochs is never cleared without ``restart``: it is
    resumed from ``last.pt`` or refused with a message naming what is missing.  Only rank 0 calls
    this (the others never write the folder).
    """
    folder = RunFolder(cfg.out or default_run_dir(cfg))
    if restart and resume is True:
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
        records, finished = folder.epoch_records(), folder.has_finished_epoch()  # only now: another run may have finished
        if resume is True and not records and not folder.has_config():
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
    return folder, bool(resume) and finished, created


def _agree_on_folder(cfg: TrainConfig, resume, dist, log, restart: bool = False) -> tuple[RunFolder, bool, list]:
    """Rank 0 names, locks and judges the run folder; every rank gets its path and the verdict (or
    rank 0's error, raised on every rank with the same message)."""
    if dist.world > 1:
        cfg = dataclasses.replace(cfg, out=broadcast_object(str(cfg.out or default_run_dir(cfg)), dist.world))
    if not dist.is_main:
        verdict = broadcast_object(None, dist.world)
        if verdict[0] == "error":
            raise ValueError(verdict[1])
        return RunFolder(cfg.out), verdict[1], []
    try:
        folder, resume, created = setup_run_folder(cfg, resume, log, restart)
    except Exception as e:
        broadcast_object(("error", str(e)), dist.world)
        raise
    broadcast_object(("ok", resume), dist.world)
    return folder, resume, created


def check_backend_device(backend: str, device: torch.device) -> None:
    """Refuse a fused neuron kernel made for another kind of device (``triton`` on a CPU run)."""
    from ..neurons.dispatch import FUSED

    fused = FUSED.get(backend)
    if fused is not None and fused.device != device.type:
        raise ValueError(f"--backend {backend}: a {fused.device} kernel, but this run is on {device}; "
                         f"use --backend auto (with --resume too: the backend is not part of the run)")


def setup_model(cfg: TrainConfig, device: torch.device) -> torch.nn.Module:
    """The network, seeded, on ``device``; its output width must equal the dataset's classes."""
    torch.manual_seed(cfg.seed)
    model = build_network(cfg.network, cfg.input_shape, cfg.T, **cfg.network_kwargs())
    check_outputs(model, cfg)
    model.set_memory(cfg.memory_options())  # --memory / --checkpoint-blocks: what backward keeps
    model.set_backend(cfg.backend)  # how the neurons run here (a resume may change it)
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


def _check_batch_fits(cfg: TrainConfig, n_train: int | None, world: int) -> None:
    """Refuse a ``--batch-size`` that leaves no full training step (``n_train=None``: not known yet)."""
    if n_train is not None and (n_train // world) // cfg.batch_size == 0:
        raise ValueError(f"--batch-size {cfg.batch_size}: larger than the {n_train} training samples"
                         + (f" per process ({world} processes)" if world > 1 else "")
                         + "; lower --batch-size" + (" or --val-split" if cfg.val_split else ""))


def _setup(cfg: TrainConfig, resume, log, restart: bool = False) -> _Session:
    cfg = resolve_config(cfg)
    check_network(cfg)  # built on the meta device: a bad network is refused before the folder is touched
    device = pick_device(cfg.device)
    dist = init_distributed(device.type)
    restarted = any(all_gather_object(restart_count() > 0, dist.world))  # one machine's agent may not count it
    if not resume and (cfg.time_limit is not None or restarted):
        resume = "auto"  # the same command continues the run: the next job, or torchrun's restarted group
        if cfg.out is None and dist.is_main:
            log(("torchrun restarted the workers" if restarted else "--time-limit") + ": without --out every "
                "start makes a new run folder; pass --out to continue the same run")
    if dist.world > 1 and device.type == "cuda":
        device = torch.device("cuda", dist.local_rank)
        torch.cuda.set_device(device)
    check_graph_options(device, cfg.cuda_graph, cfg.amp, cfg.compile, dist.world)  # before the folder is touched
    check_backend_device(cfg.backend, device)
    if cfg.checkpoint_every and cfg.cuda_graph:
        raise ValueError("--checkpoint-every: not available with --cuda-graph (the captured epoch has no step "
                         "boundary to save at); checkpoints are written after every epoch")
    if cfg.log == "tensorboard":
        from .tb_log import summary_writer_class

        summary_writer_class()  # missing package: refused before the run folder is touched
    # event datasets: the file list gives the training size before any frame cache is built
    _check_batch_fits(cfg, planned_train_samples(cfg), dist.world)
    folder, resume, created = _agree_on_folder(cfg, resume, dist, log, restart)
    s = _Session(cfg, {**cfg.to_dict(), "out": str(folder.path)}, folder, device, dist, dist.is_main, resume,
                 metrics=[], restarted=restarted)
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

            s.tb = TensorBoardLog(folder.tensorboard, s.model)
        s.data = load_train_data(cfg, device)
        _check_batch_fits(cfg, len(s.data.train), dist.world)
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

def train(cfg: TrainConfig, resume=False, log=print, restart: bool = False) -> Path:
    """Train with ``cfg`` (validated and resolved here); returns the run folder.

    - resume: continue the run in ``cfg.out`` from its ``last.pt``; refuses when the stored config
      differs in anything but the number of epochs, the device or logging.  ``"auto"`` (also what
      ``--time-limit`` and a torchrun restart imply): continue it if it has a checkpoint, else start.
    - restart: delete the run already in ``cfg.out`` (config, metrics, summary, checkpoints,
      TensorBoard logs) and train from scratch; without it a finished epoch is never deleted.
    """
    return train_status(cfg, resume, log, restart)[0]


class _StopNow(Exception):
    """Raised after a mid-epoch checkpoint when the run should stop there."""


def train_status(cfg: TrainConfig, resume=False, log=print, restart: bool = False) -> tuple[Path, str | None]:
    """:func:`train`, also returning why the run stopped before its last epoch (``"time limit"``,
    ``"SIGTERM"``, ``"SIGUSR1"``) or None when it ran to the end (``plif train`` exits with
    :data:`EXIT_STOPPED` then)."""
    limit = None if cfg.time_limit is None else parse_duration(cfg.time_limit)
    stopper = Stopper(limit, signals=int(os.environ.get("WORLD_SIZE", "1")) <= 1, log=log)
    with stopper:  # signals are handled from the start; torchrun's workers leave them to the agent
        s = _setup(cfg, resume, log, restart)
        return _loop(s, stopper, log)


def _loop(s: _Session, stopper: Stopper, log) -> tuple[Path, str | None]:
    cfg, folder = s.cfg, s.folder
    reduce = all_reduce_sum if s.dist.world > 1 else None
    steps = s.data.steps_per_epoch(cfg.batch_size, s.dist.world)
    finished, stopped = True, None
    try:
        if s.main:
            log(f"run folder: {folder.path}")
            capped = (f" (--max-train-samples {cfg.max_train_samples} caps the pool --val-split is taken from)"
                      if cfg.max_train_samples is not None and cfg.val_split > 0 else "")
            log(f"{cfg.dataset}: {len(s.data.train)} train, {len(s.data.val) if s.data.val else 0} val{capped}, "
                f"{len(s.data.test)} test samples on {s.device}; network {cfg.network}, T={cfg.T}, "
                f"every neuron {_neuron_label(cfg)}" + (f", {cfg.pool} pooling" if cfg.pool else ""))
            if s.dist.world > 1:
                log(_placement(s))
        first = s.start_epoch
        if s.restarted and first < cfg.epochs and any_rank(stopper.expired(), s.device, s.dist.world):
            # torchrun restarts a group that stopped at --time-limit (its exit status 75 is a failure
            # there): past the limit, the restarted group stops at once instead of one stretch more
            stopped, first = "time limit", cfg.epochs
        for epoch in range(first, cfg.epochs):
            try:
                row = _run_epoch(s, epoch, steps, reduce, stopper)
            except _StopNow as e:
                stopped = str(e)
                break
            s.scheduler.step()
            if s.main:
                _save_epoch(s, row)  # appends the row once everything of the epoch is written
                if s.tb is not None:
                    s.tb.epoch(row)
                log(_epoch_line(row, cfg))
            else:
                s.metrics.append(row)
            if epoch + 1 < cfg.epochs:
                stopped = _stop_reason(s, stopper)
                if stopped:
                    break
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
        if s.main and not s.metrics and s.undo is not None and not finished and not folder.has_finished_epoch():
            s.undo()  # a fresh run that finished no epoch (diverged, interrupted) leaves no stub
        if s.main and s.metrics:
            try:
                summary = _summary(s.metrics, cfg, folder.path, finished and len(s.metrics) == cfg.epochs)
                folder.write_summary({**summary, "stopped": stopped} if stopped else summary)
            except OSError:
                if finished:
                    raise  # otherwise the error already on its way (e.g. the same full disk) is the one to report
        folder.unlock()
        shutdown()
    if s.main:
        if stopped:
            log(f"stopped ({stopped}) with {folder.checkpoint('last')} saved; run the same command again "
                f"(or --resume {folder.path}) to continue; exit status {EXIT_STOPPED}")
        else:
            log(_final_report(folder, s.metrics, cfg))
    return folder.path, stopped


def _placement(s: _Session) -> str:
    """What each of the processes holds of the data (``--data-on-device``)."""
    splits = [x for x in (s.data.train, s.data.val, s.data.test) if x is not None]
    mb = sum(x.nbytes for x in splits) / 1e6
    n = s.dist.world
    if not s.data.train.streamed:
        return f"data: each of the {n} processes keeps every split whole on its device ({mb:.0f} MB each)"
    source = ("the memory-mapped frame cache (pages shared by the processes of a machine)"
              if s.cfg.dataset not in STATIC else f"host memory (every process holds the {mb:.0f} MB of uint8 images)")
    return (f"data: each of the {n} processes streams only its own 1/{n} of every epoch and evaluation, from {source}")


def _stop_reason(s: _Session, stopper: Stopper) -> str | None:
    """Right after a checkpoint: why to stop now, agreed by every rank (rank 0's reason is given)."""
    reason = stopper.reason()
    if any_rank(reason is not None, s.device, s.dist.world):
        return reason or "another process stopped"
    return None


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


def _run_epoch(s: _Session, epoch: int, steps: int, reduce, stopper: Stopper) -> dict:
    cfg, data, dist = s.cfg, s.data, s.dist
    gen = epoch_generator(cfg.seed, epoch)
    torch.manual_seed(cfg.seed * 7919 + epoch * 104729 + dist.rank)  # dropout masks
    totals, skip = None, 0
    if s.start_step and epoch == s.start_epoch:  # resumed from a mid-epoch checkpoint
        skip, totals = s.start_step, EpochTotals.from_state(s.rank_state["totals"], s.device)
        _set_rng_state(s.rank_state["rng"], s.device)
        s.start_step, s.rank_state = 0, None
    lr = float(s.optimizer.param_groups[0]["lr"])  # a device tensor under --cuda-graph: one read per epoch
    t0 = time.perf_counter()
    with sample_bar((steps - skip) * cfg.batch_size, f"epoch {epoch + 1}/{cfg.epochs}", s.main) as bar, _autocast(s):
        batches = data.train_batches(cfg.batch_size, gen, dist.rank, dist.world)
        if skip:  # drawn (the same augmentation draws) and dropped: the epoch goes on at the same batch
            batches = itertools.islice(batches, skip, None)
        after_step = _step_checkpoints(s, epoch, steps, stopper) if cfg.checkpoint_every else None
        try:
            if s.trainer is not None:
                train_loss, train_acc, n_train = s.trainer.train_epoch(batches, bar)
            else:
                train_loss, train_acc, n_train = train_epoch(s.net, s.optimizer, batches, cfg.num_classes, bar, reduce,
                                                             totals=totals, after_step=after_step)
        except Diverged:
            raise _diverged(s, epoch) from None
    if not math.isfinite(train_loss) or nonfinite_count(s.model.state_dict()):  # e.g. BatchNorm statistics
        raise _diverged(s, epoch)
    train_time = time.perf_counter() - t0
    rates = None
    # spike counts by forward hooks: a replayed CUDA graph runs none, and adding them to a compiled
    # network each epoch would make it recompile
    if s.trainer is None and not s.cfg.compile:
        from .tb_log import firing_rates

        with firing_rates(s.model) as rates:
            test_loss, test_acc, _ = _evaluate(s, data.test, "test", reduce)
    else:
        test_loss, test_acc, _ = _evaluate(s, data.test, "test", reduce)
    row = {"epoch": epoch + 1, "lr": lr, "train_loss": train_loss, "train_acc": train_acc,
           "test_loss": test_loss, "test_acc": test_acc}
    if data.val is not None:
        row["val_loss"], row["val_acc"], _ = _evaluate(s, data.val, "validation", reduce)
    taus = [float(m.tau.mean()) for m in s.model.neuron_layers() if hasattr(m, "w")]
    row.update({"taus": taus, "epoch_time_s": time.perf_counter() - t0, "train_time_s": train_time,
                "samples_per_s": n_train / train_time if train_time > 0 else float("nan")})
    if rates is not None:
        row["firing_rates"] = rates  # on this process's share of the test set (layer names as in TensorBoard)
    return row


def _step_checkpoints(s: _Session, epoch: int, steps: int, stopper: Stopper):
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
        ranks = all_gather_object({"rng": _rng_state(s.device), "totals": t.state_dict()}, s.dist.world)
        if s.main:
            save_checkpoint(s.folder.checkpoint("last"), {**_resume_state(s, epoch, s.metrics), "step": t.steps, "ranks": ranks})
        reason = _stop_reason(s, stopper)
        if reason:
            raise _StopNow(reason)

    return after_step


def _rng_state(device: torch.device) -> dict:
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state: dict, device: torch.device) -> None:
    torch.set_rng_state(state["cpu"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


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
