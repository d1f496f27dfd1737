import os
from pathlib import Path

import pytest
import torch
from plif_testing import make_images, write_idx

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


@pytest.fixture(scope="session")
def tiny_fashion(tmp_path_factory):
    """A Fashion-MNIST-format folder with 200 train and 60 test synthetic images."""
    root = tmp_path_factory.mktemp("fmnist")
    for split, n, seed in (("train", 200, 1), ("t10k", 60, 2)):
        x, y = make_images(n, seed)
        write_idx(root / f"{split}-images-idx3-ubyte.gz", x)
        write_idx(root / f"{split}-labels-idx1-ubyte.gz", y)
    return root

