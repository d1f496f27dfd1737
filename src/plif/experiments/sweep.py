"""The sweep folder format: ``plif ablate`` writes it, ``plif report`` reads it; this module owns it.

Layout::

    <sweep>/sweep.json     {"command", "dataset", "base_config", "runs": [{"label", "path", "status", ...}]}
    <sweep>/<path>/        one run folder of :func:`plif.train.train` per entry (config.json says
                           what ran; the label is only a name)
"""
from __future__ import annotations

import json
from pathlib import Path

from ..atomic import atomic_write_json

__all__ = ["SWEEP_FILE", "read_sweep", "write_sweep", "sweep_runs"]

SWEEP_FILE = "sweep.json"


def read_sweep(folder: str | Path) -> dict | None:
    """The checked ``sweep.json`` of ``folder``, or None when the folder holds none.  A file that is
    not JSON, or not a sweep (a ``runs`` list of entries with a ``label`` and a ``path``), raises
    ``ValueError`` naming it."""
    path = Path(folder) / SWEEP_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}); fix or remove it") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: unreadable ({type(e).__name__}: {e})") from None
    runs = data.get("runs") if isinstance(data, dict) else None
    if not isinstance(runs, list) or not all(isinstance(r, dict) and isinstance(r.get("label"), str)
                                             and isinstance(r.get("path"), str) for r in runs):
        raise ValueError(f"{path}: not a plif sweep file (it needs a 'runs' list of entries with 'label' and 'path')")
    return data


def write_sweep(folder: str | Path, command: str, dataset: str, base_config: dict, runs: list[dict]) -> Path:
    """Write ``sweep.json`` atomically (a kill leaves the old file or the new one)."""
    return atomic_write_json(Path(folder) / SWEEP_FILE,
                             {"command": command, "dataset": dataset, "base_config": base_config, "runs": runs},
                             indent=1)


def sweep_runs(folder: str | Path) -> list[tuple[Path, str]] | None:
    """``[(run folder, label)]`` of the sweep in ``folder``, or None when it holds no sweep."""
    data = read_sweep(folder)
    if data is None:
        return None
    return [(Path(folder) / e["path"], e["label"]) for e in data["runs"]]
