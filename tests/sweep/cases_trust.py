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
