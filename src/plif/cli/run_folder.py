"""A run folder as the commands read it (``--resume``, ``eval``, ``stats``, ``export``): its config
holding only values ``plif train`` accepts (:func:`plif.train.config.check_stored`), the module of a
surrogate it names imported only where trusted (``--trust-module``), and its network."""
from __future__ import annotations


def run_config(run, trust_modules=(), fallback: bool = False) -> dict:
    """The run's checked config; ``fallback``: the copy in ``last.pt`` where config.json is missing or
    damaged (a resume rewrites config.json), which one line says."""
    from ..runs import read_run_config
    from ..train.config import check_stored

    return read_run_config(run, check_stored, fallback=fallback, trust_modules=trust_modules,
                           log=lambda line: print(line, flush=True))


def load_checked_run(run, which: str, trust_modules=()):
    """``(network in eval mode, config)`` of checkpoint ``which`` of the run (:func:`plif.runs.load_run`),
    its config checked first (:func:`run_config`)."""
    from ..runs import load_run

    return load_run(run, which=which, config=run_config(run, trust_modules))
