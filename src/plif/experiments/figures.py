"""Writing figures and their data: PNG through matplotlib's Agg canvas, data as JSON or CSV beside it.

Every file goes through :func:`plif.data.atomic.atomic_write_bytes`, so an interrupted report
never leaves a half-written PNG.  Figures are built with ``matplotlib.figure.Figure`` directly
(no pyplot): no global backend state, nothing opens a window, nothing leaks between figures.
"""
from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

from ..atomic import atomic_write_bytes

__all__ = ["new_figure", "save_png", "save_json", "save_csv", "moving_average"]


def new_figure(width: float = 6.4, height: float = 4.0, nrows: int = 1, ncols: int = 1, **kw):
    """``(Figure, axes)`` on the Agg canvas; ``axes`` as ``Figure.subplots`` returns it."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise RuntimeError("figures need matplotlib: pip install 'plif[plots]'") from None

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, squeeze=False, **kw)


def save_png(fig, path: str | Path, dpi: int = 120) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return atomic_write_bytes(path, buf.getvalue())


def _finite(x):
    # JSON has no NaN/inf; null says "no value" unambiguously
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def save_json(path: str | Path, obj) -> Path:
    return atomic_write_bytes(path, (json.dumps(_finite(obj), indent=1) + "\n").encode())


def save_csv(path: str | Path, header: list[str], rows) -> Path:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        w.writerow(["" if v is None else (f"{v:.10g}" if isinstance(v, float) else v) for v in r])
    return atomic_write_bytes(path, buf.getvalue().encode())


def moving_average(values: list[float], window: int) -> list[float]:
    """Trailing mean over the last ``window`` values (fewer at the start), as in the paper's Fig. 5."""
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= window:
            acc -= values[i - window]
        out.append(acc / min(i + 1, window))
    return out
