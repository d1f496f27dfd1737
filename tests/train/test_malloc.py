"""plif.train.malloc: the step's freed blocks are reused instead of faulted back in every step."""
import subprocess
import sys

import pytest

_FAULTS = """
import resource, sys, torch
from plif.models import build_network
from plif.train.loop import train_step
from plif.train.optim import adam
from plif.train.malloc import keep_freed_memory
torch.set_num_threads(1)
if sys.argv[1] == "keep":
    assert keep_freed_memory()
torch.manual_seed(0)
net = build_network("{c32k3s1-BN-PLIF-MPk2s2}*2-DP-FC512-PLIF-DP-FC100-PLIF-APk10s10", (1, 28, 28), 4)
opt = adam(net.parameters(), 1e-3)
x, y = torch.rand(32, 1, 28, 28), torch.randint(0, 10, (32,))
for _ in range(4):
    train_step(net, opt, x, y, 10)
# the median step: the heap still grows into a new shape of reuse now and then (thousands of faults
# in one step, up to ~10 steps in), and the default now and then reuses a step's pages
counts = []
for _ in range(7):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    train_step(net, opt, x, y, 10)
    counts.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(sorted(counts)[3])
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _FAULTS, mode], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stdout.split()[-1])


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_training_step_memory_is_reused_without_page_faults():
    """The cpu preset's step at batch 32: glibc's defaults fault thousands of pages back in every
    step (the plain run), plif train's setting about none."""
    default, keep = _faults("default"), _faults("keep")
    assert default > 1000 and 3 * keep < default, (default, keep)


_LARGE = """
import resource, sys, torch
from plif.train.malloc import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
for _ in range(3):
    torch.empty(16 * 2**20).fill_(1.0)  # 64 MB: above glibc's largest mmap threshold
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(4):
    torch.empty(16 * 2**20).fill_(1.0)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_blocks_above_the_mmap_ceiling_are_reused_too():
    """A 64 MB block freed and allocated again: mapped afresh each time by default (16k faults
    per block of 4 KiB pages), reused from the heap under plif train's setting."""
    out = {m: subprocess.run([sys.executable, "-c", _LARGE, m], capture_output=True, text=True, timeout=120)
           for m in ("default", "keep")}
    for r in out.values():
        assert r.returncode == 0, r.stderr[-2000:]
    default, keep = (int(out[m].stdout.split()[-1]) for m in ("default", "keep"))
    assert default > 4 * 8000 and keep < 1000, (default, keep)
