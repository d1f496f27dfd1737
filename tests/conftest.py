from pathlib import Path

import pytest
import torch
from plif_testing import make_images, shared_dir, write_idx


@pytest.fixture(scope="session")
def shared_data():
    """``sub -> Path`` of ``shared/data/sub`` beside the checkout (``$PLIF_SHARED_DATA``); the test
    is skipped when that file or folder is missing.  The one contract for real sample data."""

    def get(sub: str) -> Path:
        p = shared_dir() / "data" / sub
        if not p.exists():
            pytest.skip(f"shared data {p} not available")
        return p

    return get


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

