"""A run's session: the config resolved, every rank agreed on one locked run folder, and the
model, optimiser, schedule and data set up (or restored from ``last.pt``) before the first epoch,
in the frozen :class:`plif.train.state.Session` record the epochs then use, built here once, with the
run's :class:`plif.train.state.Progress` so far.

Every value is validated and the run folder is locked before any data is loaded.  Under torchrun
rank 0 alone names, locks, judges and writes the folder; the other ranks get its verdict.  A fresh
run that fails before its first checkpoint removes what it wrote (:attr:`Session.undo`).
"""
from __future__ import annotations

import dataclasses
from datetime import datetime
from pathlib import Path

import torch

from ..data.pipeline import load_train_data, planned_train_samples
from ..device import pick_device, set_tf32
from ..kernels import self_check
from ..switches import changed as gpu_switches_on
from ..runs.folder import CHECKPOINT_DIR, CHECKPOINTS, RunFolder, prepare_out
from .checks import check_run_network
from .config import SPEED_AUTO, TrainConfig, resolve_config
from .distributed import all_gather_object, broadcast_object, init_distributed, restart_count
from .graph import GraphTrainer, check_graph_options
from .optim import build_optimizer, build_schedule
from .resume import restore
from .speed import resolve_speed
from .state import Progress, Session

__all__ = ["open_session", "default_run_dir", "setup_run_folder", "setup_model", "setup_optimizer"]


def default_run_dir(cfg: TrainConfig) -> Path:
    """``runs/<dataset>-<timestamp>``; the name is only a label, config.json says what ran."""
    return Path("runs") / f"{cfg.dataset}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


# --- the run folder ----------------------------------------------------------------------------

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
    try:
        folder.refuse_links()
        folder.lock()
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
        folder.unlock_as_found(created)  # a refusal leaves no .lock and no folder it made
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


# --- the model, optimiser and data ---------------------------------------------------------------

def setup_model(cfg: TrainConfig, device: torch.device) -> torch.nn.Module:
    """The network, seeded, its neurons on ``--backend``, fused per ``--memory`` / ``--checkpoint-blocks``
    (what backward keeps), on ``device``: a notation network and a ``--model`` one alike
    (:func:`plif.models.run_network.build_run_network`, then :func:`plif.fuse`: one planner).  Fused
    always, ``--memory none`` too: that undoes the fusion a zoo factory builds in and sets a notation
    network inside to the same table as a notation network's (:data:`plif.models.MEMORY_PRESETS`)."""
    from ..models import fuse
    from ..models.run_network import build_run_network

    model = build_run_network(cfg.to_dict(), cfg.backend, seed=cfg.seed, option="--backend")
    return fuse(model, memory=cfg.memory_options()).to(device)


def setup_optimizer(model, cfg: TrainConfig, device: torch.device):
    """The optimiser (the paper's Adam, no weight decay, unless ``--optimizer`` / ``--weight-decay`` say
    otherwise) and cosine annealing with period ``t_max`` epochs, after ``--warmup-epochs`` if asked
    (:mod:`plif.train.optim`).  Under ``--cuda-graph`` the learning rate is a device tensor (Adam capturable)."""
    recipe = cfg.recipe()
    optimizer = build_optimizer(model.parameters(), recipe, device, graph=bool(cfg.cuda_graph))
    return optimizer, build_schedule(optimizer, recipe)


def setup_parallel(model: torch.nn.Module, cfg: TrainConfig, device: torch.device, world: int) -> torch.nn.Module:
    """The module the loop (or the graph trainer) runs: SyncBN / DDP / torch.compile around the model
    as configured."""
    net = model
    if cfg.sync_bn and device.type != "cuda":
        raise ValueError("--sync-bn needs CUDA devices (PyTorch's SyncBatchNorm has no CPU implementation)")
    if cfg.sync_bn and world > 1:
        net = torch.nn.SyncBatchNorm.convert_sync_batchnorm(net)
    if world > 1:
        net = torch.nn.parallel.DistributedDataParallel(net, device_ids=[device.index] if device.type == "cuda" else None)
    if cfg.compile:
        net = torch.compile(net)
    return net


def _check_batch_fits(cfg: TrainConfig, n_train: int | None, world: int) -> None:
    """Refuse a ``--batch-size`` that leaves no full training step (``n_train=None``: not known yet)."""
    if n_train is not None and (n_train // world) // cfg.batch_size == 0:
        raise ValueError(f"--batch-size {cfg.batch_size}: larger than the {n_train} training samples"
                         + (f" per process ({world} processes)" if world > 1 else "")
                         + "; lower --batch-size" + (" or --val-split" if cfg.val_split else ""))


def _model_record(cfg: TrainConfig) -> dict:
    """A ``--model FILE.py:FACTORY`` run's file content (``model_sha256``): a reader of the run refuses
    the file once it changed (:func:`plif.runs.stored_model`); ``{}`` for other runs."""
    from ..models.factories import model_file_sha256

    sha = model_file_sha256(cfg.model)
    return {} if sha is None else {"model_sha256": sha}


def _switches_record() -> dict:
    """``{"gpu_switches": {...}}`` when ``$PLIF_GPU`` turned a switch on (each may change what the
    network computes, so config.json records it and a resume with other switches is refused), else ``{}``."""
    on = gpu_switches_on()
    return {"gpu_switches": on} if on else {}


# --- the whole set-up ----------------------------------------------------------------------------

def open_session(cfg: TrainConfig, resume, log, restart: bool = False, asked=None) -> tuple[Session, Progress]:
    """Every set-up step in order, returning the session with its run folder locked (rank 0) and the
    run's progress so far (none for a fresh run, what ``last.pt`` holds for a resume).

    asked: the options refused where they would have no effect, as :func:`resolve_config` takes it;
    None: ``not resume`` (a resume's settings are the run's own; ``plif train --resume`` names those
    given anew).  On any error the lock is released, and a fresh run's folder is left as it was found."""
    asked = not resume if asked is None else asked
    cfg = resolve_config(cfg, asked=asked)
    check_run_network(cfg, asked=asked)  # a bad network is refused before the folder is touched
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
    auto = [name for name in SPEED_AUTO if getattr(cfg, name) is None]  # a resume decides these again
    cfg, notes = resolve_speed(cfg, device.type, dist.world)  # auto: the whole-step graph and compile on CUDA
    for line in notes if dist.is_main else ():
        log(line)
    check_graph_options(device, cfg.cuda_graph, cfg.amp, dist.world)  # before the folder is touched
    set_tf32(cfg.tf32)
    if cfg.checkpoint_every and cfg.cuda_graph:
        raise ValueError("--checkpoint-every: not available with --cuda-graph (the captured epoch has no step "
                         "boundary to save at); checkpoints are written after every epoch")
    if cfg.log == "tensorboard":
        from .tb_log import summary_writer_class

        summary_writer_class()  # missing package: refused before the run folder is touched
    data_options = cfg.data_options()  # the dataset's record, resolved once for the whole run
    # event datasets: the file list gives the training size before any frame cache is built
    _check_batch_fits(cfg, planned_train_samples(data_options), dist.world)
    folder, resume, created = _agree_on_folder(cfg, resume, dist, log, restart)

    self_check.run_checks(device, [torch.float32] + ([torch.bfloat16] if cfg.amp == "bf16" else []))  # CUDA: Triton

    def record(cfg: TrainConfig) -> dict:  # config.json and the copy in each checkpoint
        return {**cfg.to_dict(), "out": str(folder.path), "speed_auto": auto, **_switches_record(),
                **self_check.record(), **_model_record(cfg)}

    cfg_dict, main, undo, tb = record(cfg), dist.is_main, None, None
    if main and not resume:
        new_tensorboard = not folder.tensorboard.exists()
        undo = lambda: folder.discard_new(created, new_tensorboard)  # noqa: E731
    try:
        if main and not resume:
            folder.write_config(cfg_dict)  # before the data loads: a full disk fails now
            folder.write_metrics([])
        model = setup_model(cfg, device)
        optimizer, scheduler = setup_optimizer(model, cfg, device)
        progress = Progress()
        if resume:  # loads last.pt into the model, optimiser and schedule
            r = restore(folder, cfg, cfg_dict, model, optimizer, scheduler, device, dist, log)
            cfg, cfg_dict, progress = r.cfg, record(r.cfg), r.progress  # the cosine period may follow new --epochs
            if main:
                folder.write_config(cfg_dict)  # what a resume may change (--epochs, --device) is recorded
        if main and cfg.log == "tensorboard":
            from .tb_log import TensorBoardLog

            tb = TensorBoardLog(folder.tensorboard, model)
        from ..models.run_network import run_prepare, takes_frames

        data = load_train_data(data_options, device)
        data = dataclasses.replace(data, prepare=run_prepare(data.prepare, cfg_dict, data_options.spec.is_event))
        _check_batch_fits(cfg, len(data.train), dist.world)
        net = setup_parallel(model, cfg, device, dist.world)
        # --cuda-graph: captured lazily, after any resume has loaded the state it replays on
        time_major = takes_frames(cfg_dict, data_options.spec.is_event)  # batches [T, B, ...]
        trainer = (GraphTrainer(model, optimizer, cfg.num_classes, device, amp=cfg.amp, net=net, time_major=time_major,
                                loss=cfg.loss_function()) if cfg.cuda_graph else None)
    except BaseException:
        if tb is not None:
            tb.close()
        if undo is not None:  # a refused fresh run leaves no stub run folder behind
            undo()
        folder.unlock()
        raise
    return Session(cfg, cfg_dict, folder, device, dist, bool(resume), restarted, model, net, optimizer, scheduler,
                   data_options, data, tb, trainer, undo), progress
