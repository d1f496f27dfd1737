import pytest
import torch

from plif.deploy.synthetic import liven_
from plif.models import build_network
from plif_testing import write_run_folder

SPEC, SHAPE, T = "{c8k3s1-BN-PLIF-MPk2s2}*2-DP-FC40-PLIF-DP-FC20-PLIF-APk10s10", (1, 16, 16), 6


@pytest.fixture
def make_run():
    """``make_run(path, seed) -> network``: a run folder as training writes it, holding
    ``best_test.pt`` of a small network whose every spiking layer fires."""

    def make(path, seed: int = 0):
        torch.manual_seed(seed)
        net = build_network(SPEC, SHAPE, T)
        liven_(net, torch.randn(32, *SHAPE))
        config = {"network": SPEC, "input_shape": list(SHAPE), "T": T, "network_kwargs": {}, "dataset": "mnist"}
        write_run_folder(path, config, model=net, checkpoint="best_test")
        return net

    return make


@pytest.fixture
def run_dir(tmp_path, make_run):
    return tmp_path / "run", make_run(tmp_path / "run")
