"""Progress: bars advance over evaluation and stats passes; off a terminal, one plain line per epoch."""
import os
import subprocess
import sys
from pathlib import Path

import torch

from plif.models import build_network
from plif.train.loop import evaluate

from plif_testing import TINY_NET, tiny_train_argv


class _Counter:
    def __init__(self):
        self.n = 0

    def update(self, k):
        self.n += k


def test_evaluation_and_stats_advance_their_bars():
    from plif.deploy.stats import collect_stats

    net = build_network(TINY_NET, (1, 28, 28), T=2)
    batches = [(torch.rand(7, 1, 28, 28), torch.randint(0, 10, (7,))) for _ in range(3)]
    bar = _Counter()
    assert evaluate(net, iter(batches), 10, progress=bar)[2] == 21 and bar.n == 21
    bar = _Counter()
    collect_stats(net, iter(batches), max_samples=10, progress=bar)
    assert bar.n == 10


def test_off_a_terminal_each_epoch_is_one_plain_line(tiny_fashion, tmp_path):
    src = Path(__file__).resolve().parents[2] / "src"
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "plif", *tiny_train_argv(tiny_fashion, tmp_path / "r", epochs=2, batch_size=40,
                                                                        val_split=0.2)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "\r" not in r.stderr and "sample/s" not in r.stderr  # no bars when stderr is not a terminal
    epoch_lines = [line for line in r.stdout.splitlines() if line.startswith("epoch ")]
    assert len(epoch_lines) == 2 and epoch_lines[0].startswith("epoch 1/2 loss")
