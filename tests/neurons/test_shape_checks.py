"""Per-channel PLIF checks where its channel dim is and names the missing-time mistake; repr shows the learnt τ."""
import re

import pytest
import torch

from plif.neurons import LIF, PLIF


def test_per_channel_plif_given_b_c_h_w_says_time_is_missing():
    with pytest.raises(ValueError, match=re.escape(
            "per-channel PLIF(num_channels=4) takes x [T, B, 4, ...], time first and the channel at dim 2; "
            "got x of shape [2, 4, 5, 5]: it looks like [B, 4, ...] without its time dimension")):
        PLIF(num_channels=4)(torch.randn(2, 4, 5, 5))


def test_per_channel_plif_given_t_b_does_not_spread_tau_over_the_batch():
    # [T, B] with B == num_channels used to broadcast one τ per sample
    with pytest.raises(ValueError, match=r"takes x \[T, B, 3, \.\.\.\].*got x of shape \[5, 3\]"):
        PLIF(num_channels=3)(torch.randn(5, 3))
    with pytest.raises(ValueError, match=r"got x of shape \[5, 2, 7\]$"):  # wrong size, no misleading hint
        PLIF(num_channels=3)(torch.randn(5, 2, 7))


def test_per_channel_step_checks_dim_1():
    n = PLIF(num_channels=3)
    s, v = n.step(torch.randn(2, 3, 4))
    assert s.shape == v.shape == (2, 3, 4)
    with pytest.raises(ValueError, match=r"\.step takes x_t \[B, 3, \.\.\.\], channel at dim 1; got x_t of shape \[2, 4\]"):
        n.step(torch.randn(2, 4))


def test_valid_shapes_pass_and_per_layer_neurons_accept_any_t_b():
    assert PLIF(num_channels=3)(torch.randn(4, 2, 3, 5, 5)).shape == (4, 2, 3, 5, 5)
    assert PLIF(num_channels=3)(torch.randn(4, 2, 3)).shape == (4, 2, 3)
    assert LIF()(torch.randn(4, 2)).shape == (4, 2) and PLIF()(torch.randn(2, 4, 5, 5)).shape == (2, 4, 5, 5)
    with pytest.raises(ValueError, match="num_channels must be a positive integer or None, got 2.5"):
        PLIF(num_channels=2.5)


def test_repr_shows_the_learnt_tau():
    n = PLIF(tau0=2.0)
    with torch.no_grad():
        n.w.fill_(0.5)  # τ = 1/sigmoid(0.5) = 1 + e^-0.5
    assert "tau=1.607 (per-layer, tau0=2)" in repr(n)
    c = PLIF(tau0=4.0, num_channels=3)
    with torch.no_grad():
        c.w.copy_(torch.tensor([0.0, 1.0, -1.0]))  # τ = 1 + e^-w = 2, 1.368, 3.718
    assert "tau=1.368..3.718 mean 2.362 (per-channel[3], tau0=4)" in repr(c)
    with torch.device("meta"):
        assert "tau0=2 (per-layer)" in repr(PLIF())
