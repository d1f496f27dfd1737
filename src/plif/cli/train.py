"""``plif train`` (the paper's protocol; the main job) and ``plif eval RUN``."""
from __future__ import annotations

import dataclasses


def _explicit_settings(args) -> dict:
    """The TrainConfig fields the user gave on the command line (argparse leaves the rest None)."""
    from ..train import TrainConfig

    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    return {k: v for k, v in vars(args).items() if k in fields and v is not None}


def run_train(args) -> int:
    import json
    from pathlib import Path

    from ..train import TrainConfig, train

    given = _explicit_settings(args)
    if not args.resume:
        train(TrainConfig(**given))
        return 0
    run = Path(args.resume if args.resume is not True else given.get("out") or "")
    if not str(run) or not (run / "config.json").is_file():
        raise ValueError(f"--resume needs a run folder holding config.json (--resume RUN), got {str(run) or 'none'!r}")
    # Continue with the run's own settings; anything given explicitly must agree with them
    # (train() refuses and lists the differences), except what a resume may change (--epochs, --device).
    stored = TrainConfig.from_dict(json.loads((run / "config.json").read_text()))
    train(dataclasses.replace(stored, **{**given, "out": str(run)}), resume=True)
    return 0


def run_eval(args) -> int:
    import json
    from pathlib import Path

    import torch

    from ..train import TrainConfig, load_run_model
    from ..train.data import eval_batches, load_test_split
    from ..train.loop import evaluate

    run = Path(args.run)
    device = torch.device(args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu"))
    results, test = {}, None
    for which in ("best_test", "best_val"):
        if not (run / "checkpoints" / f"{which}.pt").is_file():
            continue
        net, config = load_run_model(run, which)
        cfg = TrainConfig.from_dict(config)
        if test is None:
            test = load_test_split(cfg.dataset, args.data_dir or cfg.data_dir, cfg.T, cfg.max_test_samples, device)
        split, prepare = test
        _, acc, n = evaluate(net.to(device), eval_batches(split, prepare, cfg.eval_batch_size), cfg.num_classes)
        results[which] = (acc, n)
    if not results:
        raise FileNotFoundError(f"{run}: no best_test.pt or best_val.pt under checkpoints/")
    summary = json.loads((run / "summary.json").read_text()) if (run / "summary.json").is_file() else {}
    if "best_test" in results:
        acc, n = results["best_test"]
        ep = summary.get("accuracy_A", {}).get("epoch", "?")
        print(f"accuracy A: {acc:.2%} on {n} test samples (best-test checkpoint, epoch {ep})")
    if "best_val" in results:
        acc, n = results["best_val"]
        ep = summary.get("accuracy_B", {}).get("epoch", "?")
        print(f"accuracy B: {acc:.2%} on {n} test samples (best-validation checkpoint, epoch {ep})")
    return 0


def register(sub) -> None:
    from ..models import ZOO
    from ..train.config import PRESETS

    p = sub.add_parser("train", help="train on a dataset with the paper's protocol (default: Fashion-MNIST on CPU)")
    p.add_argument("--dataset", help=f"one of {', '.join(ZOO)} [fashion-mnist]")
    p.add_argument("--preset", help=f"one of {', '.join(PRESETS)}: 'paper' is SPEC §3 exactly, "
                   "'cpu' a narrower network that trains in minutes [cpu]")
    p.add_argument("--network", help="override the network string (paper notation)")
    p.add_argument("--epochs", type=int)
    p.add_argument("--T", type=int, help="time-steps")
    p.add_argument("--batch-size", type=int, help="per process")
    p.add_argument("--lr", type=float)
    p.add_argument("--t-max", type=int, help="CosineAnnealingLR period in epochs")
    p.add_argument("--neuron", help="plif, lif or if (replaces every neuron of the network)")
    p.add_argument("--tau0", type=float, help="initial tau of PLIF, tau of LIF [2]")
    p.add_argument("--pool", help="max or avg: replace every spatial pooling")
    p.add_argument("--per-channel-tau", action="store_true", default=None, help="one tau per channel instead of per layer")
    p.add_argument("--authors-code", action="store_true", default=None, help="the authors' code's network variant")
    p.add_argument("--bn-per-step", action="store_true", default=None, help="BatchNorm statistics per time-step")
    p.add_argument("--surrogate", help="atan (paper), sigmoid, rect, triangle")
    p.add_argument("--device", help="auto, cpu, cuda, cuda:1 ... [auto]")
    p.add_argument("--seed", type=int)
    p.add_argument("--data-dir", help="folder with the dataset files (Fashion-MNIST is also found in /usr/share/datasets)")
    p.add_argument("--max-train-samples", type=int)
    p.add_argument("--max-test-samples", type=int)
    p.add_argument("--val-split", type=float, help="hold out this fraction of each class for validation (protocol B, paper: 0.15)")
    p.add_argument("--eval-batch-size", type=int)
    p.add_argument("--backend", help="neuron backend: auto, bptt, reference, or a fused kernel")
    p.add_argument("--compile", action="store_true", default=None, help="torch.compile the network")
    p.add_argument("--sync-bn", action="store_true", default=None, help="SyncBatchNorm across processes (torchrun)")
    p.add_argument("--memory", choices=["none", "exact", "all"],
                   help="activation savings: exact (one-byte spikes, two-byte pool offsets, BN recomputed; "
                        "bit-identical gradients) or all (exact + bf16 potentials) [none]")
    p.add_argument("--checkpoint-blocks", action="store_true", default=None,
                   help="recompute each convolutional block in backward instead of keeping its activations")
    p.add_argument("--out", help="run folder [runs/<dataset>-<time>]")
    p.add_argument("--resume", nargs="?", const=True, default=False, metavar="RUN",
                   help="continue the run in RUN (or --out) from its last checkpoint")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=run_train)

    e = sub.add_parser("eval", help="re-evaluate a run's best checkpoints on the test set (accuracy A and B)")
    e.add_argument("run", help="run folder")
    e.add_argument("--data-dir")
    e.add_argument("--device", default="auto")
    e.set_defaults(func=run_eval)
