import pytest
import torch

from plif.deploy.synthetic import liven_
from plif.models import build_network
from plif_testing import write_run_folder

SMALL = "{c8k3s1-BN-PLIF-MPk2s2}*2-DP-FC40-PLIF-DP-FC20-PLIF-APk10s10"


def small_net(spec: str = SMALL, input_shape=(1, 16, 16), T: int = 6, dtype=torch.float32, seed: int = 0, **kw):
    """A small network with trained-like activity (every spiking layer fires)."""
    torch.manual_seed(seed)
    net = build_network(spec, input_shape, T, **kw).to(dtype)
    liven_(net, torch.randn(32, *input_shape, dtype=dtype))
    return net


def save_run(run, net, spec=SMALL, input_shape=(1, 16, 16), T=6, dataset="mnist", name="best_test", **extra):
    """A run folder as the training code writes it (plif.runs)."""
    config = {"network": spec, "input_shape": list(input_shape), "T": T, "network_kwargs": {}, "dataset": dataset,
              **extra}
    write_run_folder(run, config, model=net, checkpoint=name)
    return config


@pytest.fixture
def run_dir(tmp_path):
    net = small_net()
    save_run(tmp_path / "run", net)
    return tmp_path / "run", net


@pytest.fixture
def make_net():
    return small_net


@pytest.fixture
def make_run():
    return save_run
