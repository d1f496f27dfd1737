"""Accuracy of a narrow SEW ResNet-18 (plif's residual zoo) on real Fashion-MNIST, on the CPU, with the
paper's protocol as ``plif train --preset cpu`` runs it: MSE on the output's firing rate against the
one-hot label, Adam (lr 2e-3), cosine annealing over the epochs (stepped per epoch), batch 64, T = 4,
the image repeated at every step (a stride-0 expand), images scaled to [0, 1]; test accuracy on the
10,000 test images after each epoch.  An honest number for REPRODUCTION.md, not a target.

    nice -n 15 python benchmarks/train_residual_fmnist.py --width 8 --out /tmp/sew_fmnist.json
"""
from __future__ import annotations

import argparse
import json
import time

import torch

from plif.atomic import atomic_write_text
from plif.data.static import load_static
from plif.models.residual import parameter_count, sew_resnet18
from plif.train.loop import evaluate, train_step
from plif.train.optim import adam


def batches(images, labels, b, T, gen=None):
    order = torch.randperm(len(labels), generator=gen) if gen is not None else torch.arange(len(labels))
    for i in range(0, len(order), b):
        idx = order[i:i + b]
        x = images[idx].float().div_(255)
        yield x.unsqueeze(0).expand(T, *x.shape), labels[idx]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=8)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--T", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--limit", type=int, default=None, help="train on the first N images only (a smoke run)")
    p.add_argument("--fused", action="store_true", help="plif.fuse the network (issue 46)")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    torch.manual_seed(0)
    train_x, train_y = load_static("fashion-mnist", train=True, download=False)
    test_x, test_y = load_static("fashion-mnist", train=False, download=False)
    if a.limit:
        train_x, train_y, test_x, test_y = train_x[:a.limit], train_y[:a.limit], test_x[:a.limit], test_y[:a.limit]
    net = sew_resnet18((1, 28, 28), 10, width=a.width, fused=a.fused)
    opt = adam(net.parameters(), a.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=a.epochs)
    gen = torch.Generator().manual_seed(0)
    rows, t0 = [], time.perf_counter()
    for epoch in range(1, a.epochs + 1):
        net.train()
        loss_sum = correct = seen = 0
        for x, y in batches(train_x, train_y, a.batch_size, a.T, gen):
            loss, c, _ = train_step(net, opt, x, y, 10)
            loss_sum, correct, seen = loss_sum + float(loss) * len(y), correct + int(c), seen + len(y)
            if seen % (200 * a.batch_size) == 0:
                print(f"epoch {epoch}: {seen} images, {time.perf_counter() - t0:.0f} s", flush=True)
        sched.step()
        with torch.no_grad():
            test_loss, test_acc, n = evaluate(net, batches(test_x, test_y, 256, a.T), 10)
        rows.append({"epoch": epoch, "train_loss": loss_sum / seen, "train_acc": correct / seen,
                     "test_loss": test_loss, "test_acc": test_acc, "test_n": n,
                     "elapsed_s": round(time.perf_counter() - t0, 1)})
        print(json.dumps(rows[-1]), flush=True)
    result = {"network": f"sew-resnet18 (ADD, PLIF, ImageNet stem) width {a.width}", "params": parameter_count(net),
              "T": a.T, "batch_size": a.batch_size, "lr": a.lr, "epochs": a.epochs, "fused": a.fused,
              "torch": torch.__version__, "threads": torch.get_num_threads(), "epochs_log": rows}
    atomic_write_text(a.out, json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
