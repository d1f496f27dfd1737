"""``train(config)``: the paper's protocol end to end, in one run folder, resumable.

Run folder layout::

    <run>/config.json        the resolved config (everything needed to rebuild the network)
    <run>/metrics.jsonl      one JSON line per epoch
    <run>/summary.json       accuracy A and B, with their epochs and checkpoints
    <run>/checkpoints/       last.pt (resume), best_test.pt (A), best_val.pt (B)

Every epoch ends with an atomic ``last.pt``; everything random in an epoch is seeded from
``(seed, epoch)``, so on CPU a run killed at any point and resumed ends bit-for-bit where an
uninterrupted run does.
"""
from __future__ import annotations

import json
import math
import sys
import time
from datetime import datetime
from pathlib import Path

import torch

from ..atomic import atomic_write_bytes
from ..models import build_network
from .checkpoint import CHECKPOINTS, load_checkpoint, save_checkpoint
from .config import TrainConfig, config_diff, resolve_config
from .data import epoch_generator, load_train_data
from .distributed import all_reduce_sum, init_distributed, shutdown
from .loop import adam, evaluate, train_epoch

__all__ = ["train", "default_run_dir", "read_metrics"]


def default_run_dir(cfg: TrainConfig) -> Path:
    """``runs/<dataset>-<timestamp>``; the name is only a label, config.json says what ran."""
    return Path("runs") / f"{cfg.dataset}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


def read_metrics(run_dir: Path) -> list[dict]:
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write_json(path: Path, obj) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2) + "\n").encode())


def _write_metrics(path: Path, rows: list[dict]) -> None:
    atomic_write_bytes(path, "".join(json.dumps(r) + "\n" for r in rows).encode())


def _pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {name}: CUDA is not available on this machine; use --device cpu")
    return dev


def _summary(metrics: list[dict], cfg: TrainConfig, run_dir: Path, finished: bool) -> dict:
    best_a = max(metrics, key=lambda m: (m["test_acc"], -m["epoch"]))
    out = {
        "dataset": cfg.dataset, "preset": cfg.preset, "epochs_run": len(metrics), "epochs": cfg.epochs,
        "finished": finished,
        "accuracy_A": {"test_acc": best_a["test_acc"], "epoch": best_a["epoch"],
                       "checkpoint": str(Path("checkpoints") / CHECKPOINTS["best_test"])},
        "taus": metrics[-1]["taus"],
        "wall_time_s": sum(m["epoch_time_s"] for m in metrics),
    }
    if cfg.val_split > 0:
        best_b = max(metrics, key=lambda m: (m["val_acc"], -m["epoch"]))
        out["accuracy_B"] = {"test_acc": best_b["test_acc"], "val_acc": best_b["val_acc"],
                             "epoch": best_b["epoch"],
                             "checkpoint": str(Path("checkpoints") / CHECKPOINTS["best_val"])}
    return out


def _progress(total: int, desc: str, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="sample", unit_scale=True, leave=False, dynamic_ncols=True,
                disable=not enabled or None, mininterval=0.5, file=sys.stderr)


def train(cfg: TrainConfig, resume: bool = False, log=print) -> Path:
    """Train with ``cfg`` (resolved here); returns the run folder.

    resume: continue the run in ``cfg.out`` from its ``last.pt``; refuses when the stored config
    differs in anything but the number of epochs or the device.
    """
    cfg = resolve_config(cfg)
    device = _pick_device(cfg.device)
    dist_info = init_distributed(device.type)
    if dist_info.world > 1 and device.type == "cuda":
        device = torch.device("cuda", dist_info.local_rank)
        torch.cuda.set_device(device)
    reduce = all_reduce_sum if dist_info.world > 1 else None
    main = dist_info.is_main
    run_dir = Path(cfg.out) if cfg.out else default_run_dir(cfg)
    if resume and not (run_dir / "checkpoints" / CHECKPOINTS["last"]).is_file():
        raise FileNotFoundError(f"--resume: no checkpoint at {run_dir / 'checkpoints' / CHECKPOINTS['last']}")
    if not resume and (run_dir / "config.json").exists():
        raise ValueError(f"{run_dir} already holds a run; pass --resume to continue it or choose another --out")
    cfg_dict = {**cfg.to_dict(), "out": str(run_dir)}

    torch.manual_seed(cfg.seed)
    model = build_network(cfg.network, cfg.input_shape, cfg.T, **cfg.network_kwargs()).to(device)
    model.set_memory(cfg.memory_options())
    optimizer = adam(model.parameters(), cfg.lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=cfg.t_max)
    start_epoch, metrics = 0, []

    if resume:
        state = load_checkpoint(run_dir / "checkpoints" / CHECKPOINTS["last"], map_location=device)
        diffs = config_diff(state["config"], cfg_dict)
        if diffs:
            raise ValueError(f"--resume: {run_dir} was started with a different config:\n" + "\n".join(diffs))
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        start_epoch = state["epoch"]
        metrics = [m for m in read_metrics(run_dir) if m["epoch"] <= start_epoch]
        if main:
            log(f"resuming {run_dir} after epoch {start_epoch}")

    data = load_train_data(cfg, device)
    net = model
    if cfg.sync_bn and device.type != "cuda":
        raise ValueError("--sync-bn needs CUDA devices (PyTorch's SyncBatchNorm has no CPU implementation)")
    if cfg.sync_bn and dist_info.world > 1:
        net = torch.nn.SyncBatchNorm.convert_sync_batchnorm(net)
    if dist_info.world > 1:
        net = torch.nn.parallel.DistributedDataParallel(
            net, device_ids=[device.index] if device.type == "cuda" else None)
    if cfg.compile:
        net = torch.compile(net)

    if main:
        run_dir.mkdir(parents=True, exist_ok=True)
        _write_json(run_dir / "config.json", cfg_dict)
        if not resume:
            _write_metrics(run_dir / "metrics.jsonl", [])
            # epoch 0: the untrained weights, so even an interrupt in the first epoch leaves a checkpoint
            save_checkpoint(run_dir / "checkpoints" / CHECKPOINTS["last"], _resume_state(model, optimizer, scheduler, 0, cfg_dict))
        log(f"run folder: {run_dir}")
        log(f"{cfg.dataset}: {len(data.train)} train, {len(data.val) if data.val else 0} val, "
            f"{len(data.test)} test samples on {device}; network {cfg.network}, T={cfg.T}, "
            f"every neuron {_neuron_label(cfg)}" + (f", {cfg.pool} pooling" if cfg.pool else ""))

    steps = data.steps_per_epoch(cfg.batch_size, dist_info.world)
    finished = True
    try:
        for epoch in range(start_epoch, cfg.epochs):
            row = _run_epoch(net, model, optimizer, data, cfg, epoch, steps, dist_info, reduce, main)
            if not math.isfinite(row["train_loss"]):
                raise FloatingPointError(
                    f"training loss became {row['train_loss']} in epoch {row['epoch']}; stopped. The last good "
                    f"checkpoint is {run_dir / 'checkpoints' / CHECKPOINTS['last']} (epoch {epoch}); "
                    f"lower --lr and --resume, or start again")
            scheduler.step()
            metrics.append(row)
            if main:
                _save_epoch(run_dir, model, optimizer, scheduler, row, metrics, cfg, cfg_dict)
                log(_epoch_line(row, cfg))
    except KeyboardInterrupt:
        finished = False
        if main:
            log(f"\ninterrupted; the last complete epoch is saved in {run_dir / 'checkpoints' / CHECKPOINTS['last']} "
                f"(continue with --resume --out {run_dir})")
        raise
    finally:
        if main and metrics:
            _write_json(run_dir / "summary.json", _summary(metrics, cfg, run_dir, finished and len(metrics) == cfg.epochs))
        shutdown()
    if main:
        log(_final_report(run_dir, metrics, cfg))
    return run_dir


def _neuron_label(cfg: TrainConfig) -> str:
    if cfg.neuron == "if":
        return "IF"
    return f"{cfg.neuron.upper()} (tau{'0' if cfg.neuron == 'plif' else ''} = {cfg.tau0:g})"


def _resume_state(model, optimizer, scheduler, epoch, cfg_dict, best=None):
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
            "epoch": epoch, "config": cfg_dict, "best": best or {}}


def _run_epoch(net, model, optimizer, data, cfg, epoch, steps, dist_info, reduce, main) -> dict:
    gen = epoch_generator(cfg.seed, epoch)
    torch.manual_seed(cfg.seed * 7919 + epoch * 104729 + dist_info.rank)  # dropout masks
    lr = optimizer.param_groups[0]["lr"]
    t0 = time.perf_counter()
    with _progress(steps * cfg.batch_size, f"epoch {epoch + 1}/{cfg.epochs}", main) as bar:
        batches = data.train_batches(cfg.batch_size, gen, dist_info.rank, dist_info.world)
        train_loss, train_acc, n_train = train_epoch(net, optimizer, batches, cfg.num_classes, bar, reduce)
    train_time = time.perf_counter() - t0
    test_loss, test_acc, _ = evaluate(net, data.eval_batches(data.test, cfg.eval_batch_size, dist_info.rank, dist_info.world),
                                      cfg.num_classes, reduce)
    row = {"epoch": epoch + 1, "lr": lr, "train_loss": train_loss, "train_acc": train_acc,
           "test_loss": test_loss, "test_acc": test_acc}
    if data.val is not None:
        _, val_acc, _ = evaluate(net, data.eval_batches(data.val, cfg.eval_batch_size, dist_info.rank, dist_info.world),
                                 cfg.num_classes, reduce)
        row["val_acc"] = val_acc
    taus = [float(m.tau.mean()) for m in model.neuron_layers() if hasattr(m, "w")]
    row.update({"taus": taus, "epoch_time_s": time.perf_counter() - t0, "train_time_s": train_time,
                "samples_per_s": n_train / train_time if train_time > 0 else float("nan")})
    return row


def _save_epoch(run_dir, model, optimizer, scheduler, row, metrics, cfg, cfg_dict) -> None:
    ckpt = run_dir / "checkpoints"
    weights = {"model": model.state_dict(), "epoch": row["epoch"], "config": cfg_dict}
    if row["test_acc"] > max((m["test_acc"] for m in metrics[:-1]), default=-1.0):
        save_checkpoint(ckpt / CHECKPOINTS["best_test"], {**weights, "test_acc": row["test_acc"]})
    if "val_acc" in row and row["val_acc"] > max((m["val_acc"] for m in metrics[:-1]), default=-1.0):
        save_checkpoint(ckpt / CHECKPOINTS["best_val"], {**weights, "val_acc": row["val_acc"], "test_acc": row["test_acc"]})
    _write_metrics(run_dir / "metrics.jsonl", metrics)
    save_checkpoint(ckpt / CHECKPOINTS["last"], _resume_state(model, optimizer, scheduler, row["epoch"], cfg_dict))
    _write_json(run_dir / "summary.json", _summary(metrics, cfg, run_dir, finished=False))


def _epoch_line(row: dict, cfg: TrainConfig) -> str:
    val = f"  val {row['val_acc']:.2%}" if "val_acc" in row else ""
    taus = ", ".join(f"{t:.3g}" for t in row["taus"])
    return (f"epoch {row['epoch']:>4}/{cfg.epochs}  loss {row['train_loss']:.4f}  train {row['train_acc']:.2%}  "
            f"test {row['test_acc']:.2%}{val}  lr {row['lr']:.2e}  {row['samples_per_s']:.0f} samples/s  "
            f"{row['epoch_time_s']:.1f}s  tau [{taus}]")


def _final_report(run_dir: Path, metrics: list[dict], cfg: TrainConfig) -> str:
    if not metrics:
        return f"no epoch run; run folder: {run_dir}"
    s = json.loads((run_dir / "summary.json").read_text())
    a = s["accuracy_A"]
    lines = [f"\n{cfg.dataset}, {len(metrics)} epochs in {s['wall_time_s']:.0f}s",
             f"accuracy A (max test): {a['test_acc']:.2%} at epoch {a['epoch']}"]
    if "accuracy_B" in s:
        b = s["accuracy_B"]
        lines.append(f"accuracy B (test at best val): {b['test_acc']:.2%} at epoch {b['epoch']} (val {b['val_acc']:.2%})")
    lines.append(f"run folder: {run_dir}")
    return "\n".join(lines)
