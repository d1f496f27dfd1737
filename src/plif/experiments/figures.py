"""Writing figures and their data: PNG, PDF and/or SVG through matplotlib's Agg canvas, data as
JSON or CSV beside them.

:class:`FigureOutput` says which formats and what resolution (300 dpi by default: print quality
for PNG, and for the images embedded in a PDF; SVG is vector and ignores it).  Every file goes through :func:`plif.atomic.atomic_write_bytes`, so an interrupted report
never leaves a half-written PNG.  Figures are built with ``matplotlib.figure.Figure`` directly
(no pyplot): no global backend state, nothing opens a window, nothing leaks between figures.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from ..atomic import atomic_write_bytes, atomic_write_json

__all__ = ["FORMATS", "DEFAULT_DPI", "FigureOutput", "new_figure", "save_figure", "save_png", "save_json",
           "save_csv", "moving_average", "binary_colormap"]

FORMATS = ("png", "pdf", "svg")
DEFAULT_DPI = 300


@dataclass(frozen=True)
class FigureOutput:
    """Formats each figure is written in (``path`` with each suffix) and the dpi of raster output."""

    formats: tuple[str, ...] = ("png",)
    dpi: int = DEFAULT_DPI

    def __post_init__(self):
        if not self.formats:
            raise ValueError(f"--format: give at least one of {', '.join(FORMATS)}")
        bad = [f for f in self.formats if f not in FORMATS]
        if bad:
            raise ValueError(f"--format: unknown figure format {bad[0]!r} (choose from {', '.join(FORMATS)})")
        if isinstance(self.dpi, bool) or not isinstance(self.dpi, int) or not 10 <= self.dpi <= 2400:
            raise ValueError(f"--dpi: expected a whole number from 10 to 2400, got {self.dpi!r}")

    @classmethod
    def parse(cls, formats: str = "png", dpi: int | None = None) -> "FigureOutput":
        """From the command line: ``formats`` like ``"png,pdf,svg"`` (duplicates dropped, order kept)."""
        names = [f.strip().lower().lstrip(".") for f in formats.split(",") if f.strip()]
        return cls(tuple(dict.fromkeys(names)), DEFAULT_DPI if dpi is None else dpi)

    def paths(self, path: str | Path) -> list[Path]:
        return [Path(path).with_suffix(f".{f}") for f in self.formats]


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


def save_figure(fig, path: str | Path, output: FigureOutput = FigureOutput()) -> list[Path]:
    """Write ``fig`` as ``path`` with each of ``output.formats`` as suffix; returns those paths.

    Metadata that would make files differ from run to run (creation date, software version) is left out.
    """
    import matplotlib

    written = []
    for p, fmt in zip(output.paths(path), output.formats):
        buf = io.BytesIO()
        meta = {"png": {"Software": None}, "pdf": {"CreationDate": None, "Producer": None, "Creator": None},
                "svg": {"Date": None, "Creator": None}}[fmt]
        with matplotlib.rc_context({"svg.hashsalt": "plif"}):  # SVG ids from a fixed salt, not a random one
            fig.savefig(buf, format=fmt, dpi=output.dpi, metadata=meta)
        written.append(atomic_write_bytes(p, buf.getvalue()))
    return written


def save_png(fig, path: str | Path, dpi: int = DEFAULT_DPI) -> Path:
    return save_figure(fig, path, FigureOutput(("png",), dpi))[0]


def binary_colormap(off: str = "white", on: str = "black"):
    """``(cmap, norm)`` for 0/1 images: two flat colours, no gradient suggesting values in between."""
    from matplotlib.colors import BoundaryNorm, ListedColormap

    return ListedColormap([off, on]), BoundaryNorm([-0.5, 0.5, 1.5], 2)


def save_json(path: str | Path, obj) -> Path:
    return atomic_write_json(path, obj, indent=1)


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
