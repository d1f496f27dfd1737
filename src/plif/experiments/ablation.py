"""The paper's ablations as one resumable sweep: Table 4 (PLIF vs LIF at tau 2 and 16) and Table 5
(max vs average pooling), each entry a normal run folder under the sweep folder.

The sweep folder's format is :mod:`.sweep`'s: ``sweep.json`` (the command, the base config and
every entry with its status) and one run folder per entry, named by its label.

Running the same sweep again skips finished runs and resumes unfinished ones from their
``last.pt``; a run whose stored config differs from the one asked for is refused by ``train``.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from ..runs import RunFolder
from ..surrogate import unless_paper
from .paper_numbers import ABLATION_RESULTS, Setting
from .sweep import read_sweep, write_sweep

__all__ = ["ABLATIONS", "run_sweep", "sweep_status"]

# the sweep's entries by name: the settings of Tables 4 and 5
ABLATIONS: dict[str, Setting] = {s.name(): s for s in ABLATION_RESULTS}
"""The paper's ablations (Tables 4 and 5) by name: PLIF against LIF at τ = 2 and 16, max against average pooling."""


def _select(only) -> list[Setting]:
    if not only:
        return list(ABLATIONS.values())
    unknown = [name for name in only if name not in ABLATIONS]
    if unknown:
        raise ValueError(f"unknown ablation {', '.join(unknown)}; valid: {', '.join(ABLATIONS)}")
    return [ABLATIONS[name] for name in only]


def sweep_status(run_dir: Path, epochs: int) -> str:
    """``finished`` (all ``epochs`` done), ``partial`` (a finished epoch to resume) or ``new``.

    A folder whose run finished no epoch (killed while starting) is ``new``: it starts again.
    """
    s = _read_summary(run_dir)
    if s.get("finished") and s.get("epochs_run", 0) >= epochs:
        return "finished"
    return "partial" if RunFolder(run_dir).has_finished_epoch() else "new"


def _read_summary(run_dir: Path) -> dict:
    """The entry's summary.json, or ``{}`` when it is missing, unreadable or not a JSON object."""
    try:
        s = RunFolder(run_dir).read_summary()
    except ValueError:
        return {}
    return s if isinstance(s, dict) else {}


def _entry(a: Setting, status: str, run_dir: Path) -> dict:
    entry = {"label": a.name(), "path": a.name(), "table": a.tables(), **a.overrides(), "status": status}
    summary = _read_summary(run_dir)
    if summary:
        entry["accuracy_A"] = summary.get("accuracy_A", {}).get("test_acc")
        entry["epochs_run"] = summary.get("epochs_run")
    return entry


def run_sweep(base, out: str | Path, only=None, command: str = "", log=print) -> Path:
    """Run (or continue) the ablation sweep of ``base`` (a :class:`plif.train.TrainConfig`) in ``out``.

    only: labels to run (default all of :data:`ABLATIONS`).  Returns the sweep folder.
    """
    from ..train import resolve_config
    from ..train.run import train_status

    out = Path(out)
    chosen = _select(only)
    previous = {}
    old = read_sweep(out)
    if old is not None:
        if old.get("dataset") != base.dataset:
            raise ValueError(f"{out} holds a sweep on {old.get('dataset')!r}, not {base.dataset!r}; "
                             "choose another --out")
        previous = {e["label"]: e for e in old.get("runs", [])}

    def config(a: Setting):  # --per-channel-tau is PLIF's (LIF's tau is fixed): the LIF entries run without it
        lif = {"per_channel_tau": False} if a.neuron != "plif" else {}
        return resolve_config(dataclasses.replace(base, **a.overrides(), **lif, out=str(out / a.name())))

    configs = {a: config(a) for a in chosen}
    entries = dict(previous)

    def write(status_of: dict):
        for a in chosen:
            entries[a.name()] = _entry(a, status_of[a], out / a.name())
        write_sweep(out, command, base.dataset, {**dataclasses.asdict(base), "input_shape": list(base.input_shape)},
                    list(entries.values()))

    status = {a: sweep_status(out / a.name(), configs[a].epochs) for a in chosen}
    write(status)
    for a in chosen:
        cfg = configs[a]
        if status[a] == "finished":
            log(f"[{a.name()}] finished already ({out / a.name()}); skipped")
            continue
        resume = status[a] == "partial"
        other = unless_paper(cfg.surrogate)  # the base's, kept
        log(f"[{a.name()}] {'resuming' if resume else 'starting'}: neuron {a.neuron}, tau0 {a.tau0:g}, "
            f"{a.pool} pooling{other}, {cfg.epochs} epochs")
        status[a] = "running"
        write(status)
        try:
            stopped = train_status(cfg, resume=resume, log=log)[1]
        except BaseException:
            status[a] = sweep_status(out / a.name(), cfg.epochs)
            write(status)
            raise
        status[a] = sweep_status(out / a.name(), cfg.epochs)
        write(status)
        if stopped:  # --time-limit (one deadline for the whole sweep) or a signal: the rest waits too
            log(f"sweep stopped ({stopped}); run the same command again to continue it")
            break
    return out
