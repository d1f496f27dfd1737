"""plif.train.malloc: the step's freed blocks are reused instead of faulted back in every step.

One subprocess measures glibc's defaults first, then turns plif train's setting on and measures
the same again (the setting cannot be turned off, and a process start costs more than the steps)."""
import json
import subprocess
import sys

import pytest

_FAULTS = """
import json, resource, torch
from plif.models import build_network
from plif.train.loop import train_step
from plif.train.optim import adam
from plif.train.malloc import keep_freed_memory


def faults(fn, times):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(times):
        fn()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


torch.set_num_threads(1)
torch.manual_seed(0)
net = build_network("{c32k3s1-BN-PLIF-MPk2s2}*2-DP-FC512-PLIF-DP-FC100-PLIF-APk10s10", (1, 28, 28), 4)
opt = adam(net.parameters(), 1e-3)
x, y = torch.rand(32, 1, 28, 28), torch.randint(0, 10, (32,))
step = lambda: train_step(net, opt, x, y, 10)
large = lambda: torch.empty(16 * 2**20).fill_(1.0)  # 64 MB: above glibc's largest mmap threshold
out = {}
for mode in ("default", "keep"):
    if mode == "keep":
        assert keep_freed_memory()
    faults(step, 4)
    # the median step: the heap still grows into a new shape of reuse now and then (thousands of
    # faults in one step, up to ~10 steps in), and the default now and then reuses a step's pages
    steps = sorted(faults(step, 1) for _ in range(7))
    faults(large, 3)
    out[mode] = {"step": steps[3], "large": faults(large, 4)}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def faults() -> dict:
    """``mode -> {"step": minor faults of the median step, "large": of 4 large blocks}``."""
    out = subprocess.run([sys.executable, "-c", _FAULTS], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_training_step_memory_is_reused_without_page_faults(faults):
    """The cpu preset's step at batch 32: glibc's defaults fault thousands of pages back in every
    step (the plain run), plif train's setting about none."""
    default, keep = faults["default"]["step"], faults["keep"]["step"]
    assert default > 1000 and 3 * keep < default, (default, keep)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_blocks_above_the_mmap_ceiling_are_reused_too(faults):
    """A 64 MB block freed and allocated again: mapped afresh each time by default (16k faults
    per block of 4 KiB pages), reused from the heap under plif train's setting."""
    default, keep = faults["default"]["large"], faults["keep"]["large"]
    assert default > 4 * 8000 and keep < 1000, (default, keep)
