"""Refusals under ``torchrun --nproc_per_node=2 -m plif train`` (issue 39.6, two CPU processes).

torchrun's agent raises ``ChildFailedError`` for every worker that exits non-zero and prints its
traceback: that traceback is torchrun's own (docs/distributed.md), not plif's.  The scenario checks
that plif's line is printed before the report and is its root cause (``traceback : plif train:
error: ...``); only then is the agent's report left out of what the sweep judges, so any other
traceback, or a report without plif's line, is still judged a traceback.  Every worker that reaches
the check prints the same line (docs/distributed.md shows it): the copies are judged as one.
"""
from __future__ import annotations

import re
import subprocess
import sys
import time

from .case import Case, Result

AREA = "run"
REPORT = re.compile(r"Traceback \(most recent call last\):.*?ChildFailedError: \n=+\n.*?\n=+\n", re.S)


def _torchrun(argv):
    def run(env):
        from .run import plif_env

        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "-m", "plif", "train", *argv,
               "--device", "cpu", "--out", str(env.tmp / "run")]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, cwd=env.tmp, env=plif_env(), capture_output=True, text=True, timeout=240)
        err = p.stderr
        report = REPORT.search(err)
        causes = re.findall(r"traceback : (plif[^\n]*error: [^\n]*)", report.group(0)) if report else []
        before = err[:report.start()] if report else ""
        if causes and causes[0] in before:
            # torchrun's agent, naming plif's line as a root cause; each worker printed that line (two
            # workers writing one stderr may interleave them): judged once, where it first appears
            i = before.index(causes[0]) + len(causes[0])
            err = before[:i] + "\n" + before[i:].replace(causes[0], "") + err[report.end():]
        return Result(p.returncode, p.stdout, err, time.perf_counter() - t0)
    return run


CASES = [
    Case("torchrun-lr-zero", AREA, run=_torchrun(["--lr", "0"]), timeout=300),
    Case("torchrun-lr-not-a-number", AREA, run=_torchrun(["--lr", "abc"]), timeout=300),
    Case("torchrun-lr-subnormal", AREA, run=_torchrun(["--lr", "1e-320"]), timeout=300),
]
