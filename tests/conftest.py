import os
from pathlib import Path

import pytest
import torch
from plif_testing import make_images, save_run, shared_dir, small_net, write_idx, write_nmnist


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


@pytest.fixture
def tf32_flags():
    """A function reading torch's two TF32 flags ``(matmul, cuDNN)``; both are put back after the test."""
    def read():
        return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32

    before = read()
    yield read
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


@pytest.fixture
def make_net():
    """``make_net(spec, input_shape, T, dtype, seed, **kw)``: a small network that fires like a trained one."""
    return small_net


@pytest.fixture
def make_run():
    """``make_run(path, net=None, spec=..., input_shape=..., T=..., seed=0, **config) -> network``: a run
    folder as training writes it, holding ``best_test.pt`` of ``net`` (a new small one when None;
    plif_testing.save_run)."""
    return save_run


@pytest.fixture
def run_dir(tmp_path):
    """``(run folder, its network)``: a run of the small network with ``best_test.pt``."""
    return tmp_path / "run", save_run(tmp_path / "run")


@pytest.fixture
def nmnist_root(request, tmp_path, monkeypatch):
    """``(root, truth)``: an N-MNIST folder ``root/Train/<digit>/<k>.bin`` (and ``Test/``) of random
    events, and ``truth``, ``[(digit, (x, y, p, t))]`` of the training recordings in listing order.
    3 training recordings per digit and no test split, unless the test is marked
    ``@pytest.mark.nmnist(train=6, test=2)``.  Frame caches built without a ``cache_dir`` go under
    ``tmp_path`` (``$PLIF_DATA_ROOT``)."""
    marker = request.node.get_closest_marker("nmnist")
    counts = {"train": 3, "test": 0, **(marker.kwargs if marker else {})}
    monkeypatch.setenv("PLIF_DATA_ROOT", str(tmp_path / "cache"))
    return tmp_path / "nm", write_nmnist(tmp_path / "nm", counts["train"], counts["test"])


def pytest_configure(config):
    """Under pytest-xdist each worker takes an equal share of the cores for torch's threads (and
    for the processes the tests start), so that the workers do not fight over them."""
    config.addinivalue_line("markers", "nmnist(train, test): recordings per digit of the nmnist_root fixture")
    config.addinivalue_line("markers", "sweep: the whole bad-input sweep (tests/sweep, tens of minutes); "
                                       "run only when selected: pytest -m sweep")
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
    # The whole sweep runs only when asked for by name (-m sweep), never in the default suite.
    if "sweep" not in (config.getoption("markexpr") or ""):
        sweep = [item for item in items if item.get_closest_marker("sweep")]
        if sweep:
            config.hook.pytest_deselected(items=sweep)
            items[:] = [item for item in items if not item.get_closest_marker("sweep")]
