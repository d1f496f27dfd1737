import os
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


def pytest_configure(config):
    """Under pytest-xdist each worker takes an equal share of the cores for torch's threads (and
    for the processes the tests start), so that the workers do not fight over them."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:
        threads = str(max(1, (os.cpu_count() or 1) // int(workers)))
        os.environ.setdefault("OMP_NUM_THREADS", threads)
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    """A test that takes a module-scoped fixture (one expensive run that several tests read) goes to
    the same xdist worker as the rest of its module, so that run is made once, not once a worker
    (``--dist loadgroup``); the slow modules are scheduled first."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info and any(d.scope == "module" for defs in info.name2fixturedefs.values() for d in defs):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    # Modules with a test marked slow go first (each kept whole, so its module fixtures are made
    # once): the longest work starts while the short tests can still fill the other workers.
    slow = {item.module.__name__ for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.module.__name__ not in slow)
