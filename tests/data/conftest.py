"""Fixtures for the data tests: where the real sample files live (skip cleanly when absent)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest


def _shared_data() -> Path:
    env = os.environ.get("PLIF_SHARED_DATA")
    if env:
        return Path(env)
    return (Path(__file__).resolve().parents[2] / ".." / "shared" / "data").resolve()


@pytest.fixture(scope="session")
def shared_data():
    """Return a function ``sub -> Path`` that skips the test when ``shared/data/sub`` is missing."""

    def get(sub: str) -> Path:
        p = _shared_data() / sub
        if not p.exists():
            pytest.skip(f"shared data {p} not available")
        return p

    return get
