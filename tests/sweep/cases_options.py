"""Bad command-line options of train, spec, eval, stats and export, each tried as a user types it.

A refused ``plif train`` must leave no run folder behind (no stub: nothing is written until every
value and the network are checked), so every train case also checks that ``{tmp}/run`` is absent.
"""
from pathlib import Path

from .case import Case
from .cases_run import finished_run

TRAIN = ["train", "--data-dir", "{fmnist}", "--network", "FC10-PLIF", "--T", "1", "--max-train-samples", "64",
         "--max-test-samples", "64", "--epochs", "1", "--batch-size", "32", "--device", "cpu", "--out", "{tmp}/run"]


def no_stub(tmp: Path, r) -> str | None:
    run = tmp / "run"
    if r.returncode != 0 and run.exists():
        return f"a refused run left {sorted(p.name for p in run.iterdir())} in {run}"
    return None


# flag -> bad values (argparse's type errors, ranges, non-finite numbers, values torch cannot hold)
_INTS = ["0", "-1", "1.5", "abc", "", "1e3", "0x10", "99999999999999999999"]
_BAD = {
    "--T": _INTS + ["2147483648"],
    "--epochs": [v for v in _INTS if v != "99999999999999999999"],
    "--batch-size": _INTS + ["65", "2147483648"],
    "--t-max": _INTS[:-1],
    "--eval-batch-size": _INTS + ["2147483648"],
    "--max-train-samples": _INTS[:-1],
    "--max-test-samples": _INTS[:-1],
    "--max-val-samples": ["0", "-1", "abc"],
    "--seed": ["-1", "1.5", "abc", "4294967296", "99999999999999999999", "-99999999999999999999"],
    "--lr": ["nan", "inf", "-inf", "0", "-1", "abc", "1e400", "", "1e308"],
    "--tau0": ["nan", "inf", "-inf", "1", "0.5", "-2", "abc", "1e31", "1e308", "1e400", ""],
    "--val-split": ["nan", "inf", "1", "-0.1", "1.5", "abc", ""],
    "--dataset": ["nope", "", "FASHION-MNIST"],
    "--preset": ["nope", ""],
    "--neuron": ["nope", "", "PLIF "],
    "--pool": ["min", ""],
    "--surrogate": ["relu", ""],
    "--data-on-device": ["maybe"],
    "--memory": ["some", ""],
    "--log": ["wandb", ""],
    "--amp": ["fp16", "BF16", ""],
    "--device": ["gpu", "cuda:99", "cuda", "meta", "mps", "", "cpu:abc", "-1"],
    "--backend": ["nope", ""],
    "--data-dir": ["nope", "/dev/null", ""],
    "--out": ["/dev/null", "/proc/plif-run", ""],
    "--network": ["", " ", "FC9", "c8k3s1-PLIF", "FC99999999999999999999", "FC1000000000-FC10",
                  "c99999999999999999999k3s1-PLIF-FC10", "{FC10}*0", "FC10-PLIF-APk3s3"],
}
CASES = []
for flag, values in _BAD.items():
    for i, value in enumerate(values):
        CASES.append(Case(f"train{flag}={value!r}#{i}", "options", [*TRAIN, flag, value], check=no_stub))

_COMBOS = {
    "lif-tau-1": ["--neuron", "lif", "--tau0", "1"],
    "lif-tau-nan": ["--neuron", "lif", "--tau0", "nan"],
    "cuda-graph-on-cpu": ["--cuda-graph"],
    "sync-bn-on-cpu": ["--sync-bn"],
    "val-split-without-val-samples": ["--val-split", "0.5", "--max-val-samples", "0"],
    "resume-and-restart": ["--resume", "--restart"],
    "resume-nothing": ["--resume"],
    "resume-missing-folder": ["--resume", "{tmp}/nope"],
    "resume-a-file": ["--resume", "/etc/hostname"],
    "out-under-a-file": ["--out", "/etc/hostname/run"],
    "unknown-flag": ["--learning-rate", "1e-3"],
    "positional-junk": ["extra"],
    "batch-larger-than-data": ["--batch-size", "1000"],
    "voting-mismatch": ["--network", "FC100-PLIF-APk7s7"],
    "authors-code-cpu-net": ["--authors-code", "--network", "FC9-PLIF"],
}
CASES += [Case(f"train-{name}", "options", [*TRAIN, *extra], check=no_stub) for name, extra in _COMBOS.items()]
# bf16 autocast trains on the CPU too (it was refused there before)
CASES.append(Case("train-amp-bf16-on-cpu", "options", [*TRAIN, "--amp", "bf16"], expect="ok"))

_SPEC = ["spec", "c8k3s1-BN-PLIF-MPk2s2-FC10"]
_SPEC_BAD = {
    "--input": ["", "1,28", "1,28,28,1", "0,28,28", "1,-28,28", "1,28,x", "1.5,28,28", "1,99999999999999999999,28",
                "2147483648", "1,,28", "１,28,28"],
    "--T": ["0", "-1", "abc", "99999999999999999999", "2147483648", "1.5"],
    "--tau0": ["nan", "inf", "1", "0", "abc"],
    "--neuron": ["plif", "XIF", ""],
}
for flag, values in _SPEC_BAD.items():
    for i, value in enumerate(values):
        CASES.append(Case(f"spec{flag}={value!r}#{i}", "options", [*_SPEC, flag, value]))


def _with_run(argv):
    """A case on a copy of a finished run (``{tmp}/run``)."""
    def setup(tmp):
        finished_run(tmp / "run")
    return dict(argv=argv, setup=setup)


_RUN_BAD = {
    "stats": {"--samples": ["0", "-5", "abc", "99999999999999999999"], "--batch-size": ["0", "-1", "1.5"],
              "--seed": ["-1", "99999999999999999999"], "--which": ["nope", "{tmp}/none.pt", "/etc/hostname"],
              "--data-dir": ["nope", "/etc/hostname"], "--json": ["/proc/plif.json", "{tmp}"]},
    "eval": {"--data-dir": ["nope", "/etc/hostname", ""], "--device": ["gpu", "cuda:99", "meta"]},
    "export": {"--dt": ["nan", "inf", "0", "-1", "abc"], "--which": ["nope", "{tmp}/none.pt"],
               "--nir": ["{tmp}", "/proc/x.nir"]},
}
for cmd, flags in _RUN_BAD.items():
    for flag, values in flags.items():
        for i, value in enumerate(values):
            argv = [cmd, "{tmp}/run", flag, value]
            if cmd == "stats":
                argv += ["--random", "--samples", "8"] if flag != "--samples" else ["--random"]
            if cmd == "export" and flag != "--nir":
                argv += ["--nir", "{tmp}/x.nir"]
            CASES.append(Case(f"{cmd}{flag}={value!r}#{i}", "options", **_with_run(argv)))
CASES += [
    Case("train-good", "options", TRAIN, expect="ok"),
    Case("stats-good", "options", expect="ok", **_with_run(["stats", "{tmp}/run", "--random", "--samples", "8"])),
]
