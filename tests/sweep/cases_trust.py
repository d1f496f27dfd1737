"""Run folders whose config names a surrogate ``MODULE:NAME`` that the user did not choose (issue 39.1).

Every command that reads a run folder (eval, stats, export, train --resume, plot encoder) must refuse
in one line, importing nothing, until the user trusts the module (``--trust-module``,
``$PLIF_TRUST_MODULES``); ``report`` reads the folder as data and never imports.  The modules:
``this`` (prints the Zen of Python when imported), ``antigravity`` (opens a browser: ``$BROWSER`` is
set to a command that leaves a file behind) and a ``pwnmod.py`` lying in the working directory,
which ``python -m plif`` puts first on ``sys.path`` (it leaves a file behind and registers the
surrogate).  Trusted, ``pwnmod`` is still not imported from the working directory unless
``PYTHONPATH`` names it.
"""
from __future__ import annotations

import json
from pathlib import Path

from .case import Case
from .cases_run import finished_run

AREA = "trust"
ZEN = "Beautiful is better than ugly"
PWNMOD = """
import pathlib
pathlib.Path(__file__).with_name("pwned").write_text("ran")
from plif.surrogate import register_surrogate
register_surrogate("x", grad=lambda u, a: 1 / (1 + a * u.abs()) ** 2)
"""
COMMANDS = {
    "eval": ["eval", "run", "--device", "cpu"],
    "stats": ["stats", "run", "--random", "--samples", "8"],
    "export": ["export", "run", "--nir", "x.nir"],
    "resume": ["train", "--resume", "run", "--epochs", "3"],
    "plot-encoder": ["plot", "encoder", "run", "--out", "fig"],
    "report": ["report", "run", "--out", "rep"],
}


def _naming(spec: str):
    """setup: a finished run whose config.json (and last.pt's copy) names surrogate ``spec``; pwnmod.py beside it."""
    def setup(tmp: Path):
        import torch

        run = finished_run(tmp / "run")
        config = json.loads((run / "config.json").read_text())
        config["surrogate"] = config["network_kwargs"]["surrogate"] = spec
        (run / "config.json").write_text(json.dumps(config))
        last = run / "checkpoints" / "last.pt"
        state = torch.load(last, weights_only=True)
        state["config"] = config
        torch.save(state, last)
        (tmp / "pwnmod.py").write_text(PWNMOD)
    return setup


def _ran(tmp: Path, r) -> list[str]:
    """What the modules would have done, had they been imported."""
    return [what for what, seen in (("pwnmod.py ran", (tmp / "pwned").exists()),
                                    ("a browser was opened", (tmp / "opened").exists()),
                                    ("the Zen of Python was printed", ZEN in r.stdout + r.stderr)) if seen]


def _untrusted(spec: str, command: str) -> Case:
    module = spec.partition(":")[0]

    def check(tmp, r):
        ran = _ran(tmp, r)
        if ran:
            return f"{', '.join(ran)}: the run folder's module was imported"
        if command != "report" and f"--trust-module {module}" not in r.stderr:
            return "the refusal does not say how to trust the module"
        return None

    def run(env):
        return env.plif(*COMMANDS[command], extra_env={"BROWSER": f"touch {env.tmp / 'opened'}", "PLIF_TRUST_MODULES": ""})

    return Case(f"untrusted-{module}-{command}", AREA, run=run, setup=_naming(spec), check=check,
                expect="ok" if command == "report" else "refuse", timeout=180)


def _trusted(spec: str, command: str, how: str, expect: str, says: str) -> Case:
    """``how``: flag (--trust-module), env ($PLIF_TRUST_MODULES), each alone or with PYTHONPATH naming the cwd."""
    module = spec.partition(":")[0]

    def run(env):
        extra = {"BROWSER": f"touch {env.tmp / 'opened'}", "PLIF_TRUST_MODULES": module if "env" in how else ""}
        if "pythonpath" in how:  # the explicit way to import from the working directory
            extra["PYTHONPATH"] = f"{env.tmp}:{_plif_pythonpath()}"
        flag = ["--trust-module", module] if "flag" in how else []
        return env.plif(*COMMANDS[command], *flag, extra_env=extra)

    def check(tmp, r):
        ran = _ran(tmp, r)
        if expect == "ok" and module == "pwnmod" and "pwnmod.py ran" not in ran:
            return "the trusted module was not imported"
        if expect == "refuse" and "pwnmod.py ran" in ran:
            return "pwnmod.py in the working directory was imported"
        return None if says in r.stderr + r.stdout else f"the output does not say {says!r}"

    return Case(f"trusted-{module}-{command}-{how}", AREA, run=run, setup=_naming(spec), check=check, expect=expect,
                timeout=240)


def _plif_pythonpath() -> str:
    from .run import plif_env

    return plif_env()["PYTHONPATH"]


CASES = [_untrusted(spec, command) for spec in ("this:x", "antigravity:x", "pwnmod:x") for command in COMMANDS]
CASES += [_trusted("this:x", c, "flag", "refuse", "module 'this' registers no surrogate 'x'") for c in ("eval", "stats")]
CASES += [_trusted("pwnmod:x", c, "flag", "refuse", "the working directory is not searched")
          for c in ("eval", "stats", "export", "resume", "plot-encoder")]
CASES += [_trusted("pwnmod:x", c, "flag+pythonpath", "ok", "") for c in ("eval", "stats", "export", "resume")]
CASES += [_trusted("pwnmod:x", "stats", "env+pythonpath", "ok", "")]


# --- issue 53.3: a model file that arrives inside the run folder under a name the user trusts ---------------
GOOD = """
import pathlib
pathlib.Path(__file__).parents[3].joinpath("pwned").write_text("ran")
def make(input_shape, num_classes):
    raise SystemExit("the foreign factory ran")
"""


def _foreign_model(tmp: Path):
    """setup: a finished run whose config names ``run/code/good.py:make``, that file shipped inside it; the
    user's own ``good.py`` lies in ``mine/`` (a module of that name they trust)."""
    run = finished_run(tmp / "run")
    (run / "code").mkdir()
    (run / "code" / "good.py").write_text(GOOD)
    (run / "checkpoints" / "last.pt").unlink()  # config.json alone says what runs
    config = json.loads((run / "config.json").read_text())
    config.update(model=f"{run / 'code' / 'good.py'}:make", network=None)
    (run / "config.json").write_text(json.dumps(config))
    (tmp / "mine").mkdir()
    (tmp / "mine" / "good.py").write_text("def make(input_shape, num_classes):\n    raise SystemExit('mine')\n")


def _foreign_not_run(tmp: Path, r) -> str | None:
    if (tmp / "pwned").exists() or "foreign factory ran" in r.stderr:
        return "the file that came with the run folder ran"
    return None if "inside the run folder" in r.stderr else "the refusal does not say the file came with the run"


def _foreign(command: str, how: str) -> Case:
    def run(env):
        extra = {"PLIF_TRUST_MODULES": "good" if how == "env" else ""}
        if "pythonpath" in how:  # the user's own good.py importable: still not the file in the run folder
            extra["PYTHONPATH"] = f"{env.tmp / 'mine'}:{_plif_pythonpath()}"
        flag = {"flag": ["--trust-module", "good"], "flag+pythonpath": ["--trust-module", "good"],
                "own-file": ["--trust-module", str(env.tmp / "mine" / "good.py")], "env": []}[how]
        return env.plif(*COMMANDS[command], *flag, extra_env=extra)

    return Case(f"foreign-model-file-{command}-{how}", AREA, run=run, setup=_foreign_model, check=_foreign_not_run,
                timeout=240)


CASES += [_foreign(c, how) for c in ("eval", "stats", "resume") for how in ("flag", "flag+pythonpath", "own-file", "env")]
