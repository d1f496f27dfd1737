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
    # issue 56: the training recipe
    "--loss": ["nll", "", "MSE"],
    "--optimizer": ["adamw", "", "SGD"],
    "--weight-decay": ["-1e-4", "nan", "inf", "abc", ""],
    "--warmup-epochs": ["-1", "1", "1.5", "abc", ""],  # 1: not below --epochs 1
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
    # issue 56: the training recipe's ranges and combinations
    "sgd-momentum-1": ["--optimizer", "sgd", "--momentum", "1"],
    "sgd-momentum-negative": ["--optimizer", "sgd", "--momentum", "-0.5"],
    "sgd-momentum-nan": ["--optimizer", "sgd", "--momentum", "nan"],
    "sgd-nesterov-without-momentum": ["--optimizer", "sgd", "--momentum", "0", "--nesterov"],
    "ce-label-smoothing-1": ["--loss", "ce", "--label-smoothing", "1"],
    "tet-label-smoothing-negative": ["--loss", "tet", "--label-smoothing", "-0.1"],
    "tet-lambda-1": ["--loss", "tet", "--tet-lambda", "1"],
    "tet-phi-inf": ["--loss", "tet", "--tet-phi", "inf"],
    "warmup-past-t-max": ["--epochs", "4", "--t-max", "2", "--warmup-epochs", "3"],
    "sgd-negative-lr": ["--optimizer", "sgd", "--lr", "-0.1"],
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

# --- issue 39.4: options that would have no effect in the combination given, refused with the reason ----
CASES += [Case(f"train--lr={v!r}#f32", "options", [*TRAIN, "--lr", v], check=no_stub)
          for v in ("1e-320", "5e-324", "1e-39", "3.5e38")]
_NO_EFFECT = {
    "lif-per-channel-tau": ["--neuron", "lif", "--per-channel-tau"],
    "if-per-channel-tau": ["--neuron", "if", "--per-channel-tau"],
    "if-tau0": ["--neuron", "if", "--tau0", "3"],
    "max-val-samples-without-val-split": ["--max-val-samples", "10"],
    "authors-code-with-network": ["--authors-code"],
    "bn-per-step-without-bn": ["--bn-per-step"],
    "checkpoint-blocks-without-blocks": ["--checkpoint-blocks"],
    "trust-module-without-resume": ["--trust-module", "json"],
    "label-smoothing-with-mse": ["--label-smoothing", "0.1"],
    "tet-lambda-with-ce": ["--loss", "ce", "--tet-lambda", "0.05"],
    "tet-phi-with-mse": ["--tet-phi", "0.5"],
    "momentum-with-adam": ["--momentum", "0.5"],
    "nesterov-with-adam": ["--nesterov"],
}
CASES += [Case(f"train-no-effect-{name}", "options", [*TRAIN, *extra], check=no_stub) for name, extra in _NO_EFFECT.items()]


def _refused_step(T: int, batch: int):
    """The check of a step too large for the memory available (issue 53): one line naming --T and the batch."""
    says = f"--T {T} with --batch-size {batch}: one training step needs at least"

    def check(tmp: Path, r) -> str | None:
        return no_stub(tmp, r) or (None if says in r.stderr else f"the refusal does not say {says!r}")
    return check


# issue 53: OOM-killed at 22 GB (T 100000), the allocator's raw error (T 20000, batch 32); the cpu network
_HUGE_STEP = ["train", "--data-dir", "{fmnist}", "--device", "cpu", "--out", "{tmp}/run", "--epochs", "1"]
CASES += [Case(f"train-encoder-{enc}-T{T}-B{B}", "options",
               [*_HUGE_STEP, "--encoder", enc, "--T", str(T), "--batch-size", str(B)], check=_refused_step(T, B))
          for enc, T, B in (("latency", 100_000, 16), ("direct", 100_000, 16), ("poisson", 100_000, 16),
                            ("latency", 20_000, 32))]
CASES += [
    Case("train-recipe-ce-sgd", "options", [*TRAIN, "--loss", "ce", "--label-smoothing", "0.1", "--optimizer", "sgd",
                                            "--nesterov", "--weight-decay", "1e-4", "--lr", "0.05"], expect="ok"),
    Case("train-recipe-tet", "options", [*TRAIN, "--loss", "tet", "--tet-lambda", "0.05"], expect="ok"),
    Case("train-val-split-with-max-val-samples", "options", [*TRAIN, "--val-split", "0.25", "--max-val-samples", "10"],
         expect="ok"),
    Case("ablate-no-effect-max-val-samples", "options", ["ablate", *TRAIN[1:], "--max-val-samples", "10"], check=no_stub),
    Case("ablate-no-effect-authors-code", "options", ["ablate", *TRAIN[1:], "--authors-code"], check=no_stub),
    Case("stats-no-effect-seed-without-random", "options", ["stats", "{tmp}/run", "--seed", "3", "--samples", "8"],
         setup=_with_run([])["setup"]),
    Case("stats-no-effect-data-dir-with-random", "options", ["stats", "{tmp}/run", "--random", "--data-dir", "{tmp}"],
         setup=_with_run([])["setup"]),
    Case("plot-encoder-no-effect-steps", "options", ["plot", "encoder", "{tmp}/run", "--out", "{tmp}/o", "--steps", "9"],
         setup=_with_run([])["setup"]),
    Case("eval-trust-module-not-a-module", "options", ["eval", "{tmp}/run", "--trust-module", "../evil"],
         setup=_with_run([])["setup"]),
]
for flags in (["--which", "last"], ["--for", "norse"], ["--bn", "fold"], ["--dt", "1"], ["--no-verify"],
              ["--allow-inexact-dt"], ["--trust-module", "json"]):
    CASES.append(Case(f"export-check-no-effect{flags[0]}", "options", ["export", "--check", "{tmp}/x.nir", *flags]))
for flags in (["--samples", "2"], ["--checkpoint", "last"], ["--layer", "1"], ["--event", "{tmp}/x.bin"],
              ["--channels", "0"], ["--data-dir", "{tmp}"], ["--trust-module", "json"]):
    CASES.append(Case(f"plot-neuron-no-effect{flags[0]}", "options", ["plot", "neuron", "--out", "{tmp}/o", *flags]))
_DATA_NO_EFFECT = {
    "prepare-static-T": ["prepare", "fashion-mnist", "--root", "{fmnist}", "--T", "4"],
    "prepare-static-split": ["prepare", "fashion-mnist", "--root", "{fmnist}", "--split", "time"],
    "prepare-static-cache-dir": ["prepare", "fashion-mnist", "--root", "{fmnist}", "--cache-dir", "{tmp}/c"],
    "prepare-static-workers": ["prepare", "fashion-mnist", "--root", "{fmnist}", "--workers", "0"],
    "prepare-static-no-flip-x": ["prepare", "mnist", "--root", "{tmp}", "--no-flip-x"],
    "prepare-static-allow-empty": ["prepare", "mnist", "--root", "{tmp}", "--allow-empty"],
    "prepare-static-verify": ["prepare", "mnist", "--root", "{tmp}", "--verify"],
    "prepare-event-no-download": ["prepare", "nmnist", "--root", "{tmp}", "--no-download"],
    "prepare-nmnist-no-flip-x": ["prepare", "nmnist", "--root", "{tmp}", "--no-flip-x"],
    "prepare-gesture-no-flip-x": ["prepare", "dvs128-gesture", "--root", "{tmp}", "--no-flip-x"],
    "download-static-keep-archives": ["download", "fashion-mnist", "--root", "{tmp}", "--keep-archives"],
    "verify-folder-and-cache-dir": ["verify", "{tmp}", "--cache-dir", "{tmp}"],
    "clean-static-dataset": ["clean", "--cache-dir", "{tmp}", "--dataset", "mnist"],
    "clean-unknown-dataset": ["clean", "--cache-dir", "{tmp}", "--dataset", "nope"],
}
CASES += [Case(f"data-no-effect-{name}", "options", ["data", *argv]) for name, argv in _DATA_NO_EFFECT.items()]

# --- issue 53.10: a value equal to the default is still a value given; an empty zoo name lists nothing ----
_MODEL = ["train", "--data-dir", "{fmnist}", "--model", "sew-resnet18", "--T", "1", "--max-train-samples", "64",
          "--max-test-samples", "64", "--epochs", "1", "--batch-size", "32", "--device", "cpu", "--out", "{tmp}/run"]
CASES += [Case(f"train-model-no-effect{'=' .join(['', *flags])}", "options", [*_MODEL, *flags], check=no_stub, timeout=300)
          for flags in (["--tau0", "2"], ["--tau0", "3"], ["--detach-reset"], ["--no-detach-reset"], ["--encoder", "direct"],
                        ["--neuron", "plif"], ["--surrogate", "atan"], ["--pool", "max"])]
CASES += [Case(f"zoo-name={name!r}", "options", ["zoo", name]) for name in ("", " ")]

# --- issue 53.4 / 53.13: a --model factory that ends the process, reseeds torch, or raises after building layers --
_FACTORIES = """
import sys
import torch
from torch import nn
from plif import PLIF
from plif.layers import TimeFolded, Voting


def exits_zero():
    sys.exit(0)


def exits_three():
    sys.exit(3)


def reseeds(input_shape, num_classes):
    torch.manual_seed(0)
    return nn.Sequential(TimeFolded(nn.Flatten()), TimeFolded(nn.Linear(784, num_classes * 10)), PLIF(), Voting(10))


def builds_then_raises(input_shape, num_classes, T):
    from plif.models.residual import sew_resnet18
    sew_resnet18(input_shape, num_classes, T)
    raise RuntimeError("out of ideas")
"""


def _factories(tmp: Path):
    (tmp / "nets.py").write_text(_FACTORIES)
    (tmp / "exits_at_import.py").write_text("import sys\nsys.exit(3)\n")
    cxx = tmp / "cxx"  # a compiler that leaves a mark: no kernel build may start before the factory is checked
    cxx.write_text(f"#!/bin/sh\ntouch {tmp / 'compiled'}\nexit 1\n")
    cxx.chmod(0o755)


def _factory_refused(why: str):
    def check(tmp: Path, r) -> str | None:
        if (tmp / "compiled").exists():
            return "a kernel build started before the factory was checked"
        if why not in r.stderr:
            return f"the refusal does not say {why!r}"
        return no_stub(tmp, r)
    return check


def _model(ref: str, *extra):
    def run(env):
        return env.plif(*[env.fill(a) for a in [*TRAIN[:3], "--model", ref, *TRAIN[5:], *extra]], timeout=300,
                        extra_env={"CXX": str(env.tmp / "cxx"), "PLIF_CACHE_DIR": str(env.tmp / "cache")})
    return run


CASES += [Case(f"train-model-{name}", "options", run=_model(ref), setup=_factories, check=_factory_refused(why), timeout=300)
          for name, ref, why in (("sys-exit-0", "{tmp}/nets.py:exits_zero", "the factory called sys.exit(0)"),
                                 ("sys-exit-3", "{tmp}/nets.py:exits_three", "the factory called sys.exit(3)"),
                                 ("sys-exit-at-import", "{tmp}/exits_at_import.py:make", "called sys.exit(3)"),
                                 ("raises-after-building-layers", "{tmp}/nets.py:builds_then_raises",
                                  "the factory raised RuntimeError: out of ideas"))]


def _two_seeds_two_networks(env):
    """--seed 1 and --seed 2 with a factory that calls torch.manual_seed(0): two networks (as plif train builds them)."""
    code = ("import torch; from plif.train import TrainConfig, resolve_config; "
            "from plif.train.session import setup_model\n"
            "def w(seed):\n"
            f"    cfg = resolve_config(TrainConfig(dataset='fashion-mnist', data_dir={env.subst['fmnist']!r}, T=1, "
            "seed=seed, model='nets.py:reseeds', memory='none'))\n"
            "    return torch.cat([p.detach().flatten() for p in setup_model(cfg, torch.device('cpu')).parameters()])\n"
            "print('same' if torch.equal(w(1), w(2)) else 'different')")
    return env.python(code, timeout=300)


CASES.append(Case("train-model-reseeding-factory-two-seeds", "options", run=_two_seeds_two_networks, setup=_factories,
                  expect="ok", check=lambda tmp, r: None if r.stdout.strip() == "different" else
                  "--seed 1 and --seed 2 give the same network"))

# plif bench bound (issue 55.1): each bad value refused in one line before any network is built
_BOUND = ["bench", "bound", "--preset", "cpu", "--T", "1", "--batch", "2", "--rounds", "1", "--warmup", "0",
          "--no-spikingjelly"]
for _name, _extra in {"rounds-0": ["--rounds", "0"], "batch-0": ["--batch", "0"], "warmup-negative": ["--warmup", "-1"],
                      "precision-fp16": ["--precisions", "fp16"], "width-without-model": ["--width", "8"],
                      "model-unknown": ["--model", "resnet-9000"], "width-0": ["--model", "sew-resnet18", "--width", "0"], "dataset-unknown": ["--dataset", "mnist2"]}.items():
    CASES.append(Case(f"bench-bound-{_name}", "options", [*_BOUND, *_extra]))
