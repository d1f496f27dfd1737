import json
import os
import subprocess
import sys
from pathlib import Path

from plif_testing import TINY_NET


def test_two_process_gloo_torchrun(tiny_fashion, tmp_path):
    out = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "plif", "train",
           "--data-dir", str(tiny_fashion), "--network", TINY_NET, "--T", "2", "--epochs", "2", "--batch-size", "10",
           "--device", "cpu", "--out", str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2]
    # each of the 2 ranks takes 100 of the 200 samples: 10 steps of 10, so 200 samples per epoch in total
    assert proc.stdout.count("run folder:") == 2  # printed by rank 0 only (start and end)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["finished"]
    assert Path(out / "checkpoints" / "last.pt").is_file()
