"""Run folders damaged, linked, killed, shared and filled, then resumed, re-run, evaluated and exported.

The rule checked: nothing a finished epoch left is lost.  A damaged folder is resumed (from
``last.pt``) or refused with nothing changed in it; a kill -9 at any moment is resumed to the end;
a second process on the same folder is refused; a full disk is one line naming the file.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .case import Case, Result, SkipCase, need

FMNIST = Path("/usr/share/datasets/fashion-mnist")
SMALL = ["--data-dir", str(FMNIST), "--network", "FC10-PLIF", "--T", "1", "--max-train-samples", "64",
         "--max-test-samples", "64", "--batch-size", "32", "--device", "cpu"]
_lock = threading.Lock()
_template: dict = {}


def finished_run(dest: Path, epochs: int = 2) -> Path:
    """A copy of a run that finished ``epochs`` epochs of 3 (trained once per sweep, then copied)."""
    need(FMNIST)
    with _lock:
        if epochs not in _template:
            root = Path(tempfile.mkdtemp(prefix="plif-sweep-template-"))
            repo = Path(__file__).resolve().parents[2]
            env = {**os.environ, "PYTHONPATH": str(repo / "src"), "OMP_NUM_THREADS": "1"}
            p = subprocess.run([sys.executable, "-m", "plif", "train", *SMALL, "--epochs", str(epochs), "--t-max", "3",
                                "--out", str(root / "run")], env=env, capture_output=True, text=True, timeout=300)
            if p.returncode != 0:
                raise RuntimeError(f"the template run failed: {p.stderr[-500:]}")
            _template[epochs] = root / "run"
    shutil.copytree(_template[epochs], dest, symlinks=True)
    return dest


def snapshot(folder: Path) -> dict:
    if not folder.is_dir():
        return {}
    return {str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and not p.is_symlink()
                                         else "link:" + os.readlink(p) if p.is_symlink() else "dir")
            for p in sorted(folder.rglob("*")) if p.name != ".lock"}


# --- damage: name -> function(run folder) ----------------------------------------------------------
def _write(rel, data):
    def f(run):
        (run / rel).write_bytes(data)
    return f


def _rm(rel):
    def f(run):
        p = run / rel
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    return f


def _truncate(rel, n):
    def f(run):
        p = run / rel
        p.write_bytes(p.read_bytes()[:n])
    return f


def _link(rel):
    def f(run):
        target = run.parent / ("outside-" + rel.replace("/", "-"))
        os.replace(run / rel, target)
        (run / rel).symlink_to(target)
    return f


def _config(**changes):
    def f(run):
        d = json.loads((run / "config.json").read_text())
        for k, v in changes.items():
            if v is _DEL:
                d.pop(k, None)
            else:
                d[k] = v
        (run / "config.json").write_text(json.dumps(d))
    return f


def _nan_weights(rel):
    def f(run):
        import torch

        p = run / rel
        state = torch.load(p, weights_only=True)
        for v in state["model"].values():
            if v.is_floating_point():
                v.fill_(float("nan"))
        torch.save(state, p)
    return f


def _ckpt_key(rel, key, value=None):
    def f(run):
        import torch

        p = run / rel
        state = torch.load(p, weights_only=True)
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
        torch.save(state, p)
    return f


def _lock_link(run):
    (run / ".lock").unlink(missing_ok=True)
    (run / ".lock").symlink_to(run.parent / "victim")


_DEL = object()
L, B, M, S, C = "checkpoints/last.pt", "checkpoints/best_test.pt", "metrics.jsonl", "summary.json", "config.json"

# damage -> what each command must do: "ok" or "refuse"; commands left out are refused.
# resume: plif train --resume RUN --epochs 3; again: plif train --out RUN (no --resume);
# eval / stats / export read best_test.pt (not last.pt, metrics or summary).
_READERS_OK = {"stats": "ok", "export": "ok"}
DAMAGES = {
    "metrics-garbled": (_write(M, b"{not json\n"), {"resume": "ok", **_READERS_OK}),
    "metrics-empty": (_write(M, b""), {"resume": "ok", **_READERS_OK}),
    "metrics-deleted": (_rm(M), {"resume": "ok", **_READERS_OK}),
    "metrics-torn-line": (_truncate(M, 40), {"resume": "ok", **_READERS_OK}),
    "metrics-not-utf8": (_write(M, b"\xff\xfe" * 30), {"resume": "ok", **_READERS_OK}),
    "metrics-nul-bytes": (_write(M, b"\0" * 4096), {"resume": "ok", **_READERS_OK}),
    "metrics-array-rows": (_write(M, b"[1,2]\n[3]\n"), {"resume": "ok", **_READERS_OK}),
    "last-deleted": (_rm(L), _READERS_OK),
    "last-garbled": (_write(L, b"garbage" * 100), _READERS_OK),
    "last-empty": (_write(L, b""), _READERS_OK),
    "last-truncated": (_truncate(L, 500), _READERS_OK),
    "last-nan": (_nan_weights(L), _READERS_OK),
    "last-no-optimizer": (_ckpt_key(L, "optimizer"), _READERS_OK),
    "last-epoch-string": (_ckpt_key(L, "epoch", "two"), _READERS_OK),
    "last-epoch-zero": (_ckpt_key(L, "epoch", 0), _READERS_OK),
    "best-deleted": (_rm(B), {"resume": "ok"}),
    "best-garbled": (_write(B, b"garbage"), {"resume": "ok"}),
    "best-nan": (_nan_weights(B), {"resume": "ok"}),
    "summary-garbled": (_write(S, b"{"), {"resume": "ok", **_READERS_OK}),
    "summary-deleted": (_rm(S), {"resume": "ok", **_READERS_OK}),
    "checkpoints-deleted": (_rm("checkpoints"), {}),
    "config-garbled": (_write(C, b"{garbage"), {"resume": "ok"}),
    "config-empty": (_write(C, b""), {"resume": "ok"}),
    "config-deleted": (_rm(C), {"resume": "ok"}),
    "config-array": (_write(C, b"[]"), {"resume": "ok"}),
    "config-huge-T": (_config(T=10**20), {"resume": "ok"}),
    "config-huge-seed": (_config(seed=10**20), {"resume": "ok"}),
    "config-huge-classes": (_config(num_classes=10**20), {"resume": "ok"}),
    "config-huge-int-network": (_config(network="FC99999999999999999999"), {"resume": "ok"}),
    "config-tau0-string": (_config(tau0="2"), {"resume": "ok"}),
    "config-tau0-below-1": (_config(tau0=0.5), {"resume": "ok"}),
    "config-no-network": (_config(network=_DEL), {"resume": "ok"}),
    "config-unknown-dataset": (_config(dataset="nope"), {"resume": "ok"}),
    "config-bad-kwargs": (_config(network_kwargs={"bogus": 1}), {"resume": "ok"}),
    "config-batch-zero": (_config(eval_batch_size=0), {"resume": "ok"}),
    "link-lock": (_lock_link, _READERS_OK),
    "link-config": (_link(C), _READERS_OK),
    "link-metrics": (_link(M), _READERS_OK),
    "link-last": (_link(L), _READERS_OK),
    "link-checkpoints": (_link("checkpoints"), _READERS_OK),
}
COMMANDS = {
    "resume": ["train", "--resume", "{tmp}/run", "--epochs", "3"],
    "again": ["train", *SMALL, "--epochs", "3", "--t-max", "3", "--out", "{tmp}/run"],
    "stats": ["stats", "{tmp}/run", "--random", "--samples", "8", "--which", "best_test"],
    "export": ["export", "{tmp}/run", "--nir", "{tmp}/x.nir", "--which", "best_test"],
}


def _damage_case(name, damage, cmd, expect):
    state = {}

    def setup(tmp):
        run = finished_run(tmp / "run")
        if name == "link-lock":
            (tmp / "victim").write_text("precious")
        damage(run)
        state["before"] = snapshot(run)

    def check(tmp, r):
        run = tmp / "run"
        if name == "link-lock" and (tmp / "victim").read_text() != "precious":
            return "the pid was written through the .lock link"
        if expect == "refuse" or cmd in ("eval", "stats", "export"):
            after = snapshot(run)
            if after != state["before"]:
                changed = sorted(set(after.items()) ^ set(state["before"].items()))
                return f"the run folder changed: {changed[:3]}"
            return None
        if r.returncode == 0:  # resumed: all three epochs recorded, last.pt at epoch 3
            rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
            if [x["epoch"] for x in rows] != [1, 2, 3]:
                return f"metrics.jsonl holds epochs {[x['epoch'] for x in rows]} after the resume"
            if "finished no epoch" in r.stdout + r.stderr:
                return "the run was started again from scratch"
        return None

    return Case(f"damaged-{name}-{cmd}", "run", COMMANDS[cmd], expect=expect, setup=setup, check=check, timeout=180)


CASES = [_damage_case(name, damage, cmd, oks.get(cmd, "refuse"))
         for name, (damage, oks) in DAMAGES.items() for cmd in COMMANDS]


def _wait_for(path: Path, proc=None, limit: float = 60.0) -> None:
    """Until ``path`` exists, ``limit`` seconds pass or ``proc`` (the plif process making it) ends."""
    deadline = time.time() + limit
    while not path.exists() and time.time() < deadline and (proc is None or proc.poll() is None):
        time.sleep(0.05)


# --- kill -9 at a random moment, then resume: ends where an uninterrupted run does -------------------
def _kill_and_resume(seed: int):
    def run(env) -> Result:
        need(FMNIST)
        rnd = random.Random(seed)
        argv = ["train", *SMALL, "--epochs", "3", "--t-max", "3", "--out", str(env.tmp / "run")]
        p = env.plif(*argv, wait=False)
        # a random moment of the run: once its folder exists (a kill before that leaves nothing to
        # resume, and under load the start-up alone can take longer than the old fixed 2 s)
        _wait_for(env.tmp / "run" / "config.json", p)
        time.sleep(rnd.uniform(0.0, 7.0))
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.communicate()
        return env.plif("train", "--resume", str(env.tmp / "run"), timeout=180)

    def check(tmp, r):
        run = tmp / "run"
        rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
        if [x["epoch"] for x in rows] != [1, 2, 3]:
            return f"after kill + resume metrics.jsonl holds epochs {[x['epoch'] for x in rows]}"
        if not (run / "checkpoints" / "best_test.pt").is_file():
            return "no best_test.pt after kill + resume"
        return None

    return Case(f"kill-9-then-resume#{seed}", "run", run=run, expect="ok", check=check, timeout=300)


CASES += [_kill_and_resume(seed) for seed in range(6)]


# --- two processes on one folder -------------------------------------------------------------------
def _concurrent(second: str):
    def run(env) -> Result:
        need(FMNIST)
        out = str(env.tmp / "run")
        # long enough (20,000 samples an epoch) that the second process starts while it trains
        first = env.plif("train", *SMALL, "--epochs", "3", "--max-train-samples", "20000", "--network",
                         "c16k3s1-BN-PLIF-MPk2s2-FC10", "--out", out, wait=False)
        _wait_for(env.tmp / "run" / ".lock")
        time.sleep(0.5)
        extra = {"train": ["train", *SMALL, "--epochs", "3", "--network", "c16k3s1-BN-PLIF-MPk2s2-FC10", "--out", out],
                 "resume": ["train", "--resume", out],
                 "restart": ["train", *SMALL, "--epochs", "1", "--restart", "--out", out]}[second]
        r = env.plif(*extra, timeout=120)
        first.communicate(timeout=240)
        return r

    def check(tmp, r):
        rows = [json.loads(x) for x in (tmp / "run" / "metrics.jsonl").read_text().splitlines() if x.strip()]
        if [x["epoch"] for x in rows] != [1, 2, 3]:
            return f"the first run ended with epochs {[x['epoch'] for x in rows]}"
        return None

    return Case(f"concurrent-{second}", "run", run=run, check=check, timeout=300)


CASES += [_concurrent(s) for s in ("train", "resume", "restart")]


# --- a full disk: a tiny tmpfs (root only; skipped elsewhere) --------------------------------------
def _full_disk(what: str, size: str):
    def run(env) -> Result:
        disk = env.tmp / "disk"
        disk.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)],
                          capture_output=True).returncode != 0:
            raise SkipCase("cannot mount a tmpfs here (not root?)")
        try:
            if what == "train":
                return env.plif("train", *SMALL, "--epochs", "1", "--out", str(disk / "run"), timeout=180)
            if what == "tensorboard":
                return env.plif("train", *SMALL, "--epochs", "1", "--log", "tensorboard", "--out", str(disk / "run"),
                                timeout=180)
            finished_run(env.tmp / "run")
            try:  # fill the disk: the small JSON or NIR file must meet a full one
                with open(disk / "filler", "wb") as f:
                    while True:
                        f.write(b"\0" * 1024)
                        f.flush()
            except OSError:
                pass
            if what == "stats-json":
                return env.plif("stats", str(env.tmp / "run"), "--random", "--samples", "8", "--json",
                                str(disk / "s.json"), timeout=180)
            return env.plif("export", str(env.tmp / "run"), "--nir", str(disk / "x.nir"), timeout=180)
        finally:
            subprocess.run(["umount", "-l", str(disk)], capture_output=True)

    def check(tmp, r):
        if r.returncode != 0 and str(tmp / "disk") not in r.stderr:
            return f"the error does not name the file on the full disk: {r.stderr.strip()[-200:]}"
        return None

    return Case(f"full-disk-{what}-{size}", "run", run=run, check=check, timeout=300)


CASES += [_full_disk(w, s) for w in ("train", "tensorboard", "stats-json", "export") for s in ("4k", "64k")]
