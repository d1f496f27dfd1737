"""One bad input, fault or attack tried as a user would, and how its outcome is judged.

A case either runs ``plif ARGV...`` (``argv``) or its own scenario (``run``: start, kill, resume ...,
or Python code as a user of the library writes it, :attr:`Env.python`).
Strings in ``argv`` may name ``{tmp}`` (the case's own empty folder), ``{shared}`` (the project's
real sample data, ``../shared/data``) and ``{fmnist}`` (a folder with the four official
Fashion-MNIST files, or a tiny stand-in in the same format).  ``setup(tmp)`` writes what the case
needs first; ``check(tmp, result)`` returns a problem (something lost, wrong or half-written) or None.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

EXPECT = ("refuse", "ok")


class SkipCase(Exception):
    """Raised by a case (its setup or scenario) when what it needs is not on this machine."""


def need(path: str | Path) -> Path:
    """``path``, or skip the case when it does not exist here."""
    p = Path(path)
    if not p.exists():
        raise SkipCase(f"{p} not found")
    return p  # a bad input must be refused; a good one (after a fault) must work


@dataclasses.dataclass
class Result:
    returncode: int | None  # None: it did not end before its timeout
    stdout: str
    stderr: str
    seconds: float


@dataclasses.dataclass
class Case:
    name: str
    area: str  # notation | options | static | events | cache | disk | kill | concurrency | crafted | run
    argv: list[str] | None = None
    expect: str = "refuse"
    setup: Callable[[Path], None] | None = None
    check: Callable[[Path, Result], str | None] | None = None
    run: Callable[["Env"], Result] | None = None  # a scenario of its own instead of one command
    timeout: float = 120.0

    def __post_init__(self):
        if (self.argv is None) == (self.run is None):
            raise ValueError(f"case {self.name}: give exactly one of argv and run")
        if self.expect not in EXPECT:
            raise ValueError(f"case {self.name}: expect must be one of {EXPECT}")


@dataclasses.dataclass
class Env:
    """What a scenario gets: its folder, the substitutions and a way to run ``plif`` and Python."""

    tmp: Path
    subst: dict
    plif: Callable[..., Result]  # plif(*argv, timeout=..., wait=True) -> Result; wait=False -> Popen
    # python(code, timeout=..., env=None) -> Result: ``python -c code`` in the case's folder, as plif runs
    python: Callable[..., Result] | None = None

    def fill(self, text: str) -> str:
        return fill(text, self.subst)


def fill(text: str, subst: dict) -> str:
    """``text`` with each ``{name}`` of ``subst`` replaced (other braces, as in the notation, stay)."""
    for k, v in subst.items():
        text = text.replace("{" + k + "}", str(v))
    return text
