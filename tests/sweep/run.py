"""Try every bad input in ``cases_*.py`` as a user would and sort the outcomes.

    python -m tests.sweep [--jobs 2] [--area events] [-k substring] [--json out.json]   (from the checkout)

Each case runs ``python -m plif ...`` in a fresh process and its own empty folder.  Outcomes:

- ``refused``: non-zero exit with a one-line ``plif ...: error: ...`` message (what a bad input gets)
- ``ok``: exit 0 where the case expects success
- ``traceback``: a Python traceback (or torch's C++ backtrace) reached the user
- ``silent``: a bad input was accepted (exit 0)
- ``unclear``: refused, but not in one ``error:`` line
- ``wrong-refusal``: a good input (or a resume after a fault) was refused
- ``lost``: the case's own check found data lost, wrong or half-written
- ``crash`` (killed by a signal) and ``hang`` (no end before its timeout)

Exit status 1 when any case is not ``refused``/``ok``.  Needs no network; uses the project's
``../shared/data`` and the Debian Fashion-MNIST files when present (cases needing them are skipped
otherwise, and counted as skipped).
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from .case import Case, Env, Result, SkipCase, fill
from .damage import SHARED_DATA

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

FMNIST = Path("/usr/share/datasets/fashion-mnist")
BAD = ("traceback", "silent", "unclear", "wrong-refusal", "lost", "crash", "hang")


def load_cases() -> list[Case]:
    cases = []
    for path in sorted(HERE.glob("cases_*.py")):
        cases.extend(importlib.import_module(f"{__package__}.{path.stem}").CASES)
    names = Counter(c.name for c in cases)
    twice = [n for n, k in names.items() if k > 1]
    if twice:
        raise SystemExit(f"case names used twice: {', '.join(twice)}")
    return cases


def plif_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONWARNINGS"] = "ignore"
    return env


def make_runner(tmp: Path, env: dict):
    def plif(*argv, timeout: float = 120.0, wait: bool = True, stdin=subprocess.DEVNULL, python=None, extra_env=None):
        cmd = [sys.executable, *(["-c", python] if python is not None else ["-m", "plif"]), *map(str, argv)]
        run_env = env if extra_env is None else {**env, **extra_env}
        if not wait:
            return subprocess.Popen(cmd, cwd=tmp, env=run_env, stdin=stdin, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True)
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, cwd=tmp, env=run_env, stdin=stdin, capture_output=True, text=True, timeout=timeout)
            return Result(p.returncode, p.stdout, p.stderr, time.perf_counter() - t0)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            return Result(None, out, err, time.perf_counter() - t0)
    return plif


def judge(case: Case, r: Result, problem: str | None) -> str:
    if r.returncode is None:
        return "hang"
    text = r.stderr + r.stdout
    if "Traceback (most recent call last)" in text or "frame #0:" in text:  # Python's, or a C++ backtrace
        return "traceback"
    if r.returncode < 0:
        return "crash"
    if problem:
        return "lost"
    if case.expect == "ok":
        return "ok" if r.returncode == 0 else "wrong-refusal"
    if r.returncode == 0:
        return "silent"
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error:" in ln]
    return "refused" if len(errors) == 1 else "unclear"


def run_case(case: Case, shared: Path, base_env: dict) -> dict:
    with tempfile.TemporaryDirectory(prefix="plif-sweep-") as d:
        tmp = Path(d)
        subst = {"tmp": str(tmp), "shared": str(shared), "fmnist": str(FMNIST)}
        plif = make_runner(tmp, base_env)

        def python(code: str, timeout: float = 120.0, env: dict | None = None) -> Result:
            return plif(timeout=timeout, python=code, extra_env=env)

        token = SHARED_DATA.set(Path(shared))  # the samples damage.py reads come from --shared too
        try:
            if case.setup:
                case.setup(tmp)
            if case.run:
                r = case.run(Env(tmp, subst, plif, python))
            else:
                r = plif(*[fill(a, subst) for a in case.argv], timeout=case.timeout)
            problem = case.check(tmp, r) if case.check else None
        except SkipCase as e:
            return {"name": case.name, "area": case.area, "outcome": "skipped", "why": str(e)}
        except Exception as e:  # a broken case is the sweep's bug, not plif's: say so loudly
            return {"name": case.name, "area": case.area, "outcome": "case-error", "why": repr(e)}
        finally:
            SHARED_DATA.reset(token)
        outcome = judge(case, r, problem)
        lines = r.stderr.strip().splitlines() or [""]
        tail = next((ln for ln in lines if "error:" in ln), lines[-1])[:300]
        return {"name": case.name, "area": case.area, "outcome": outcome, "rc": r.returncode,
                "seconds": round(r.seconds, 2), "message": tail, "problem": problem}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.sweep", description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--area", action="append", help="only these areas (repeatable)")
    ap.add_argument("-k", dest="match", help="only cases whose name contains this")
    ap.add_argument("--json", type=Path, help="write every outcome here")
    ap.add_argument("--list", action="store_true", help="list the cases and stop")
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data",
                    help="the real sample data (N-MNIST, AEDAT, MNIST IDX) [../shared/data]")
    a = ap.parse_args(argv)
    cases = [c for c in load_cases() if (not a.area or c.area in a.area) and (not a.match or a.match in c.name)]
    if a.list:
        for c in cases:
            print(f"{c.area:12} {c.name}")
        print(f"{len(cases)} cases")
        return 0
    env = plif_env()
    results = []
    with cf.ThreadPoolExecutor(max(1, a.jobs)) as pool:
        futs = {pool.submit(run_case, c, a.shared, env): c for c in cases}
        for f in cf.as_completed(futs):
            res = f.result()
            results.append(res)
            if res["outcome"] not in ("refused", "ok", "skipped"):
                print(f"{res['outcome']:13} {res['area']:12} {res['name']}: {res.get('message') or res.get('why')}",
                      flush=True)
    by_area = {}
    for r in results:
        by_area.setdefault(r["area"], Counter())[r["outcome"]] += 1
    total = Counter(r["outcome"] for r in results)
    print(f"\n{len(results)} cases")
    for area, c in sorted(by_area.items()):
        print(f"  {area:12} " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    print("  all          " + ", ".join(f"{k} {v}" for k, v in sorted(total.items())))
    if a.json:
        a.json.write_text(json.dumps(sorted(results, key=lambda r: (r["area"], r["name"])), indent=1))
    return 1 if any(total[k] for k in (*BAD, "case-error")) else 0


if __name__ == "__main__":
    sys.exit(main())
