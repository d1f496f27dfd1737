"""The grid checker catches a wrong backend (so a passing kernel test means something)."""
import torch

from plif.kernels.check import Case, case_grid, main, run_case
from plif.neurons import register_backend
from plif.neurons.bptt import multi_step_bptt
from plif.neurons.dispatch import BACKENDS


def _off_by_a_bit(x, k, v0, cfg):
    s, v = multi_step_bptt(x, k * 1.001 if cfg.leak else k, v0, cfg)
    return s, v


def test_checker_passes_bptt_and_fails_a_perturbed_backend(capsys):
    register_backend("test-perturbed", _off_by_a_bit)
    try:
        case = Case((5, 2, 3, 4, 5), "PLIF", "channel", True, False)
        assert run_case(case, "bptt")["ok"]
        bad = run_case(case, "test-perturbed")
        assert not bad["ok"] and bad["g_x"] > bad["tol"]
        assert main(["--backend", "test-perturbed", "--quick"]) == 1
        assert "FAIL" in capsys.readouterr().out
    finally:
        BACKENDS.pop("test-perturbed")


def test_grid_covers_every_flag():
    grid = case_grid(quick=True)
    assert {c.neuron for c in grid} == {"IF", "LIF", "PLIF"}
    assert {c.k_mode for c in grid} == {"layer", "channel", "neuron"}
    assert {(c.hard, c.detach) for c in grid} == {(True, True), (True, False), (False, True), (False, False)}
    assert {c.surrogate for c in grid} == {"atan", "sigmoid", "rect", "triangle"}
    assert any(c.shape[0] == 1 for c in grid) and any(torch.Size(c.shape[1:]).numel() > 1024 for c in grid)
