"""Progress of per-sample work (training, evaluation, ``plif eval``, ``plif stats``, frame-cache builds).

A tqdm bar on stderr when stderr is a terminal.  Otherwise (a log file, a pipe, a batch job) no
``\\r`` redraws ever reach the log: :func:`sample_bar` shows nothing (training prints one line per
epoch instead) and :func:`work_bar`, for long one-off work such as building a frame cache, writes
one plain line per tenth of the work.
"""
from __future__ import annotations

import sys

__all__ = ["sample_bar", "work_bar"]


def sample_bar(total: int, desc: str, enabled: bool = True):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="sample", unit_scale=True, leave=False, dynamic_ncols=True,
                disable=not enabled or None, mininterval=0.5, file=sys.stderr)


class _Lines:
    """A tqdm-like counter that prints ``desc: 30% (300/1000 samples)`` each time another tenth is done."""

    def __init__(self, total: int, desc: str, initial: int, unit: str, file):
        self.total, self.desc, self.n, self.unit, self.file = total, desc, initial, unit, file

    def _tenth(self, n: int) -> int:
        return 10 * n // self.total if self.total else 10

    def update(self, n: int = 1) -> None:
        before, self.n = self.n, self.n + n
        if self._tenth(self.n) > self._tenth(before):
            print(f"{self.desc}: {100 * self.n / self.total:.0f}% ({self.n}/{self.total} {self.unit}s)",
                  file=self.file, flush=True)

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def work_bar(total: int, desc: str, enabled: bool = True, initial: int = 0, unit: str = "sample", file=None):
    """A tqdm bar on a terminal; plain lines every 10% when ``file`` (stderr) is not one; nothing when disabled."""
    from tqdm import tqdm

    file = sys.stderr if file is None else file
    if enabled and not (hasattr(file, "isatty") and file.isatty()):
        return _Lines(total, desc, initial, unit, file)
    return tqdm(total=total, initial=initial, desc=desc, unit=unit, disable=not enabled, file=file)
