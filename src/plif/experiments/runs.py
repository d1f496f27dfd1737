"""Reading run folders for reports: tolerant of unfinished and older runs, loud about what is missing.

A run folder is what :func:`plif.train.train` writes (``config.json``, ``metrics.jsonl``,
``summary.json``).  A sweep folder holds ``sweep.json`` and one run folder per entry.  Reports
read these files only, through the format's owner :mod:`plif.runs.folder`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..runs import RunFolder, read_config_json, read_json_file, read_metrics
from ..surrogate import PAPER_SURROGATE
from .sweep import SWEEP_FILE, sweep_runs
from .paper_numbers import Setting

__all__ = ["RunRecord", "read_run", "expand_run_paths", "effective_pool", "SWEEP_FILE"]


@dataclass
class RunRecord:
    """One run as read from disk.

    metrics: the per-epoch rows (possibly empty); notes: human-readable problems found while
    reading (unfinished run, missing summary, missing fields), shown in the report.
    """

    path: Path
    label: str
    config: dict
    metrics: list[dict]
    summary: dict
    notes: list[str] = field(default_factory=list)

    @property
    def dataset(self) -> str:
        return self.config.get("dataset", "?")

    @property
    def setting(self) -> Setting:
        neuron = str(self.config.get("neuron", "plif")).lower()
        return Setting(neuron, float(self.config.get("tau0", 2.0)), effective_pool(self.config),
                       str(self.config.get("surrogate") or PAPER_SURROGATE))  # older runs stored none: atan

    def accuracy_a(self) -> tuple[float, int] | None:
        """``(max test accuracy, its epoch)`` from the metrics (the summary may be stale or absent)."""
        rows = [m for m in self.metrics if "test_acc" in m]
        if not rows:
            return None
        best = max(rows, key=lambda m: (m["test_acc"], -m["epoch"]))
        return best["test_acc"], best["epoch"]

    def accuracy_b(self) -> tuple[float, int] | None:
        """``(test accuracy at the best validation accuracy, its epoch)``; earliest epoch wins ties."""
        rows = [m for m in self.metrics if "val_acc" in m and "test_acc" in m]
        if not rows:
            return None
        best = max(rows, key=lambda m: (m["val_acc"], -m["epoch"]))
        return best["test_acc"], best["epoch"]

    def taus(self) -> list[list[float]]:
        """τ of every PLIF layer per epoch: ``[epochs][layers]`` (rows without taus are skipped)."""
        return [list(m["taus"]) for m in self.metrics if m.get("taus")]

    def firing_rates(self) -> list[dict[str, float]]:
        """The firing rate of every spiking layer per epoch, ``[epochs]{qualified name: rate}`` (rows without
        rates are skipped); a row written before layers were named by module (``2_PLIF``) reads as ``layers.2``
        (:func:`plif.models.names.stored_names`), so a run resumed across the change is one series."""
        from ..models.names import stored_names

        return [stored_names(m["firing_rates"]) for m in self.metrics if m.get("firing_rates")]


def effective_pool(config: dict) -> str:
    """The spatial pooling a run used: the ``pool`` override, else what its network string says."""
    from ..models import NotationError, parse

    if config.get("pool"):
        return config["pool"]
    try:
        tokens = parse(config.get("network") or "")
    except NotationError:
        return "max"
    if tokens and tokens[-1].kind == "pool":
        tokens = tokens[:-1]  # the final APk<n>s<n> is the voting layer, not spatial pooling
    ops = {t.args["op"] for t in tokens if t.kind == "pool"}
    return "avg" if ops == {"AP"} else "max"


def _read_json(path: Path, notes: list[str]):
    try:
        return read_json_file(path)
    except ValueError as e:
        notes.append(f"{e}; ignored")
        return None


def read_run(path: str | Path, label: str | None = None) -> RunRecord:
    """Read one run folder; raises ``FileNotFoundError`` only when it has no ``config.json``."""
    folder = RunFolder(path)
    path = folder.path
    notes: list[str] = []
    config = read_config_json(folder)  # a config we cannot read is an error, named
    metrics = read_metrics(path, notes)
    summary = {}
    if folder.summary.is_file():
        summary = _read_json(folder.summary, notes) or {}
    elif metrics:
        notes.append("no summary.json; accuracies computed from metrics.jsonl")
    epochs = config.get("epochs")
    if metrics and epochs and len(metrics) < epochs:
        notes.append(f"unfinished: {len(metrics)} of {epochs} epochs")
    if metrics and not any("taus" in m for m in metrics) and str(config.get("neuron", "plif")).lower() == "plif":
        notes.append("metrics carry no taus (older run format?); no tau curve")
    if metrics and not all("epoch_time_s" in m for m in metrics):
        notes.append("some epochs lack epoch_time_s; wall times are lower bounds")
    return RunRecord(path, label or path.name, config, metrics, summary, notes)


def expand_run_paths(paths) -> list[tuple[Path, str]]:
    """Run folders and sweep folders -> ``[(run folder, label)]``; a sweep contributes its runs."""
    out: list[tuple[Path, str]] = []
    for p in map(Path, paths):
        runs = sweep_runs(p)
        if runs is not None:
            out.extend(runs)
        elif p.is_dir():
            out.append((p, p.name))
        else:
            raise FileNotFoundError(f"{p}: no such run or sweep folder")
    return out
