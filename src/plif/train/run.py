"""``train(config)``: the paper's protocol end to end, in one locked run folder, resumable.

The data flows through three steps, in the manner of torchtune's recipes: a session
(:mod:`.session`: config, run folder, model, optimiser and schedule, data; or ``last.pt``
restored, :mod:`.resume`), its epochs (:mod:`.epochs`), and what the run reports
(:mod:`.summary`).  This module joins them and makes the end of a run, however it ends, leave the
folder consistent: ``summary.json`` written, the lock released, no stub of a run that finished
no epoch.  The run folder's format is :mod:`plif.runs.folder`.
"""
from __future__ import annotations

import os
from pathlib import Path

from .config import TrainConfig
from .distributed import shutdown
from .epochs import run_epochs
from .session import default_run_dir, open_session
from .state import Progress, Session
from .stopping import EXIT_STOPPED, Stopper, parse_duration, stopped_exit_status
from .summary import final_report, run_summary, start_lines

__all__ = ["train", "train_status", "default_run_dir", "EXIT_STOPPED"]


def train(cfg: TrainConfig, resume=False, log=print, restart: bool = False) -> Path:
    """Train with ``cfg`` (validated and resolved here); returns the run folder.

    - resume: continue the run in ``cfg.out`` from its ``last.pt``; refuses when the stored config
      differs in anything but the epochs and where and how the run executes, logs and is checkpointed
      (:data:`plif.train.resume.RESUMABLE_CHANGES`).  ``"auto"`` (also what
      ``--time-limit`` and a torchrun restart imply): continue it if it has a checkpoint, else start.
    - restart: delete the run already in ``cfg.out`` (config, metrics, summary, checkpoints,
      TensorBoard logs) and train from scratch; without it a finished epoch is never deleted.

    Example: one epoch of a one-layer network on 64 random images in Fashion-MNIST's format
    (``data_dir`` names their folder; without it plif finds or downloads the real dataset):

    >>> import gzip, tempfile
    >>> import numpy as np
    >>> from pathlib import Path
    >>> folder = Path(tempfile.mkdtemp())
    >>> def write_idx(name, a):                          # Fashion-MNIST's file format, IDX in gzip
    ...     with gzip.open(folder / name, "wb") as f:
    ...         _ = f.write(bytes([0, 0, 8, a.ndim]) + np.array(a.shape, ">u4").tobytes() + a.tobytes())
    >>> rng = np.random.default_rng(0)
    >>> for split, n in (("train", 64), ("t10k", 32)):
    ...     write_idx(f"{split}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
    ...     write_idx(f"{split}-labels-idx1-ubyte.gz", np.arange(n, dtype=np.uint8) % 10)
    >>> from plif.runs import read_metrics
    >>> from plif.train import TrainConfig, train
    >>> cfg = TrainConfig(dataset="fashion-mnist", data_dir=str(folder), network="FC10-PLIF", T=2, epochs=1,
    ...                   batch_size=32, out=str(folder / "run"))
    >>> run = train(cfg, log=lambda line: None)          # log=print (the default) shows its progress
    >>> sorted(p.name for p in (run / "checkpoints").iterdir())
    ['best_test.pt', 'last.pt']
    >>> [row["epoch"] for row in read_metrics(run)]
    [1]
    """
    return train_status(cfg, resume, log, restart)[0]


def train_status(cfg: TrainConfig, resume=False, log=print, restart: bool = False,
                 asked=None) -> tuple[Path, str | None]:
    """:func:`train`, also returning why the run stopped before its last epoch (``"time limit"``,
    ``"SIGTERM"``, ``"SIGUSR1"``) or None when it ran to the end (``plif train`` then exits with
    :func:`~plif.train.stopping.stopped_exit_status`: 75, or 0 in a torchrun worker).  ``asked``: as
    :func:`~plif.train.session.open_session` takes it (``plif train --resume``: the options given)."""
    limit = None if cfg.time_limit is None else parse_duration(cfg.time_limit)
    stopper = Stopper(limit, signals=int(os.environ.get("WORLD_SIZE", "1")) <= 1, log=log)
    with stopper:  # signals are handled from the start; torchrun's workers leave them to the agent
        s, progress = open_session(cfg, resume, log, restart, asked)
        return _run(s, progress, stopper, log)


def _run(s: Session, progress: Progress, stopper: Stopper, log) -> tuple[Path, str | None]:
    cfg, folder = s.cfg, s.folder
    finished = True
    try:
        if s.main:
            for line in start_lines(s):
                log(line)
        for progress in run_epochs(s, progress, stopper, log):
            pass  # the last one is what the run finished, however the loop ends
    except KeyboardInterrupt:
        finished = False
        if s.main and progress.metrics:
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
        metrics, stopped = list(progress.metrics), progress.stopped
        if s.main and not metrics and s.undo is not None and not finished and not folder.has_finished_epoch():
            s.undo()  # a fresh run that finished no epoch (diverged, interrupted) leaves no stub
        if s.main and metrics:
            try:
                summary = run_summary(metrics, cfg, folder.path, finished and len(metrics) == cfg.epochs)
                folder.write_summary({**summary, "stopped": stopped} if stopped else summary)
            except OSError:
                if finished:
                    raise  # otherwise the error already on its way (e.g. the same full disk) is the one to report
        folder.unlock()
        shutdown()
    if s.main:
        if stopped:
            log(f"stopped ({stopped}) with {folder.checkpoint('last')} saved; run the same command again "
                f"(or --resume {folder.path}) to continue; exit status {stopped_exit_status()}")
        else:
            log(final_report(folder, metrics, cfg))
    return folder.path, stopped
