"""``plif train`` (the paper's protocol; the main job) and ``plif eval RUN``."""
from __future__ import annotations

import dataclasses
from pathlib import Path


def run_train(args) -> int:
    from ..train.run import train_status
    from ..train.stopping import stopped_exit_status
    from .config_flags import given_settings

    def train(cfg, resume=False, restart=False, asked=None) -> int:  # stopped by --time-limit or SIGTERM/SIGUSR1: 75
        return stopped_exit_status() if train_status(cfg, resume, restart=restart, asked=asked)[1] else 0

    given = given_settings(args)
    if not args.resume:
        from ..train import TrainConfig

        if args.trust_module:  # the --surrogate and --model typed here are imported as asked
            raise ValueError("--trust-module is for --resume, eval, stats, export and plot encoder: the modules a "
                             "run folder's config may make plif import (a --surrogate MODULE:NAME or --model you "
                             "give is imported as given)")

        cfg = TrainConfig(**given)
        if args.download:
            from ..train.config import resolve_config

            # a bad option fails now, not after a long download
            _download(cfg, check=lambda c: resolve_config(c, asked=set(given)))
        return train(cfg, restart=args.restart, asked=set(given))  # a value given is refused where idle, the default's too
    if args.restart:
        raise ValueError("--restart deletes the run in --out and --resume continues it: give one of them")
    run = Path(args.resume if args.resume is not True else given.get("out") or "")
    if not str(run):
        raise ValueError("--resume needs a run folder (--resume RUN or --out RUN)")
    # Continue with the run's own settings; anything given explicitly must agree with them
    # (train() refuses and lists the differences), except what a resume may change (--epochs, --device).
    typed = given.get("surrogate", "")  # a MODULE:NAME typed again is the user's choice of MODULE
    trust = [*args.trust_module, *([typed.partition(":")[0]] if ":" in typed else [])]
    if given.get("model"):  # so is a --model typed again (a file: by its path)
        from ..models.factories import model_trust

        trust += [m for m in [model_trust(given["model"])] if m]
    stored = _stored_config(run, trust)
    cfg = dataclasses.replace(stored, **{**given, "out": str(run)})
    # the options given are refused where they would have no effect (train checks them; the run's own are
    # kept as it ran with them)
    asked = set(given)
    if args.download:  # checked as train checks them, before the data folder is made and a long download
        from ..train.config import resolve_config
        from ..train.checks import check_run_network

        check_run_network(resolve_config(cfg, asked=asked), asked=asked)
        _download(cfg)
    return train(cfg, resume=True, asked=asked)


def _download(cfg, check=None) -> None:
    """``--download``: fetch an event dataset into --data-dir (or the default folder) once every other
    value checked out (``check(cfg)``, run once that folder exists: it must); static datasets are
    downloaded by their loader anyway."""
    from ..data.event_download import download_event_dataset

    if not cfg.dataset_spec.is_event:
        return
    if cfg.data_dir is not None:
        Path(cfg.data_dir).expanduser().mkdir(parents=True, exist_ok=True)
    if check is not None:
        check(cfg)
    download_event_dataset(cfg.dataset_spec, cfg.data_dir)


def _stored_config(run, trust_modules):
    """The run's config: ``config.json``, or when that is missing or damaged the copy in ``last.pt``
    (the resume rewrites config.json); the config.json error when neither can be had.  What plif
    decided for the run's device is left to it again (``speed_auto``: decided where the resume runs)."""
    from ..train.config import TrainConfig, left_to_plif
    from .run_folder import run_config

    return TrainConfig.from_dict(left_to_plif(run_config(run, trust_modules, fallback=True)))


def run_eval(args) -> int:
    """``plif eval RUN``: accuracy A and B of a run's best checkpoints on its test split
    (:func:`plif.train.evaluate_run.evaluate_run`)."""
    from ..train.evaluate_run import evaluate_run

    for i, r in enumerate(evaluate_run(args.run, args.data_dir, args.device, args.trust_module, progress=True)):
        if i == 0:
            print(r.precision)
        name, checkpoint = ("A", "best-test") if r.which == "best_test" else ("B", "best-validation")
        print(f"accuracy {name}: {r.accuracy:.2%} on {r.samples} test samples ({checkpoint} checkpoint, epoch {r.epoch})")
    return 0


def register(sub) -> None:
    from ..data.event_download import download_help
    from .config_flags import add_config_flags

    p = sub.add_parser("train", help="train on a dataset with the paper's protocol (default: Fashion-MNIST on CPU)")
    add_config_flags(p)
    p.add_argument("--resume", nargs="?", const=True, default=False, metavar="RUN",
                   help="continue the run in RUN (or --out) from its last checkpoint")
    p.add_argument("--download", action="store_true",
                   help=f"event datasets: fetch, check and unpack the dataset into --data-dir first ({download_help()})")
    p.add_argument("--restart", action="store_true",
                   help="delete the run already in --out (config, metrics, summary, checkpoints, TensorBoard logs) "
                        "and train from scratch; without it plif never deletes a finished epoch")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    from .checks import add_trust_flag, existing_folder

    add_trust_flag(p)
    p.set_defaults(func=run_train)

    e = sub.add_parser("eval", help="re-evaluate a run's best checkpoints on the test set (accuracy A and B)")
    e.add_argument("run", help="run folder")
    e.add_argument("--data-dir", type=existing_folder, help="dataset folder if not the run's")
    e.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda, ... [auto]")
    e.add_argument("--debug", action="store_true", help="show tracebacks")
    add_trust_flag(e)
    e.set_defaults(func=run_eval)
