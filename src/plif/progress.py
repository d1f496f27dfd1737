"""The one progress bar of per-sample work (training, evaluation, ``plif eval``, ``plif stats``).

A tqdm bar on stderr when stderr is a terminal; nothing otherwise (training prints one line per
epoch instead), so logs stay plain.
"""
from __future__ import annotations

import sys

__all__ = ["sample_bar"]


def sample_bar(total: int, desc: str, enabled: bool = True):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="sample", unit_scale=True, leave=False, dynamic_ncols=True,
                disable=not enabled or None, mininterval=0.5, file=sys.stderr)
