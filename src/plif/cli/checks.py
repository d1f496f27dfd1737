"""Argument types that refuse a bad value while the command line is parsed, before any work.

``type=int_in(1, MAX_INT)`` turns ``--batch-size 0`` into argparse's one-line
``argument --batch-size: must be between 1 and 2147483647, got 0`` instead of an error deep inside
the command; ``existing_folder`` refuses an input folder that does not exist (nothing is created).
"""
from __future__ import annotations

import argparse
import os

from ..models.notation import MAX_INT  # torch's sizes and the notation's numbers
from ..train.checks import MAX_SEED

__all__ = ["int_in", "existing_folder", "add_trust_flag", "MAX_INT", "MAX_SEED"]


def int_in(lo: int, hi: int):
    """An argparse ``type``: an integer in ``[lo, hi]``."""
    def parse(text: str) -> int:
        try:
            if not text.isascii():  # as the notation: digits 0-9 only
                raise ValueError(text)
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be between {lo} and {hi}, got {value}")
        return value

    parse.__name__ = "int"  # argparse names the type in its messages
    return parse


def module_name(text: str) -> str:
    """An argparse ``type``: an absolute module name (dotted Python identifiers)."""
    from ..surrogate import is_module_name

    if not is_module_name(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a module name (dotted Python identifiers, e.g. "
                                         "mypackage.surrogates)")
    return text


def trust_entry(text: str) -> str:
    """An argparse ``type``: a module name, or the path of a model file (``FILE.py``, made absolute)."""
    from ..runs.config import is_file_path

    if is_file_path(text):
        if not text.endswith(".py"):
            raise argparse.ArgumentTypeError(f"{text!r}: a model file's path ends in .py (or give a module name)")
        return os.path.abspath(os.path.expanduser(text))
    return module_name(text)


def add_trust_flag(p) -> None:
    """``--trust-module MODULE|FILE.py`` (repeatable): a module the run folder may make plif import, or
    a model file (by its path) it may run."""
    p.add_argument("--trust-module", action="append", default=[], type=trust_entry, metavar="MODULE|FILE.py",
                   help="import MODULE where the run's config names a surrogate MODULE:NAME or a --model "
                        "MODULE:FACTORY, or run FILE.py (by its path, not its name) where it names a --model "
                        "FILE.py:FACTORY (importing runs its code: without this, or $PLIF_TRUST_MODULES=mod1,mod2, "
                        "such a run is refused); repeatable")


def existing_folder(text: str) -> str:
    """An argparse ``type``: a folder that exists (an input; plif creates nothing there)."""
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text}: no such folder" if not os.path.exists(text)
                                         else f"{text}: not a folder")
    return text
