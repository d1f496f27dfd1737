import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """``../shared/data`` beside the checkout (or ``$PLIF_SHARED_DATA``)."""
    env = os.environ.get("PLIF_SHARED_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    d = shared_data_dir()
    if not d.is_dir():
        pytest.skip(f"shared sample data not found at {d}")
    return d


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
