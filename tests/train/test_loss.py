import torch

from plif.train.loss import firing_rate, per_sample_rate_mse, rate_mse_loss


def test_the_per_sample_loss_averages_to_the_batch_loss():
    out = (torch.rand(5, 7, 10) < 0.3).float()
    y = torch.randint(0, 10, (7,))
    loss, rate = rate_mse_loss(out, y, 10)
    per_sample, rate2 = per_sample_rate_mse(out, y, 10)
    assert per_sample.shape == (7,) and torch.equal(rate, rate2)
    assert torch.allclose(per_sample.mean(), loss)
    assert torch.allclose(loss, ((out.mean(0) - torch.eye(10)[y]) ** 2).mean())


def test_half_precision_spikes_give_the_exact_rate():
    out = (torch.rand(3, 4, 10) < 0.5).to(torch.bfloat16)
    rate = firing_rate(out)
    assert rate.dtype == torch.float32 and torch.equal(rate, out.float().sum(0) / 3)


# --- --loss ce / tet (issue 56): each against a hand computation -------------------------------------

import math  # noqa: E402

import pytest  # noqa: E402

from plif.train.loss import LOSSES, Loss, mean_ce_loss, per_sample_mean_ce, per_sample_tet, tet_loss  # noqa: E402

# T = 2, B = 1, C = 2: step outputs [1, 0] and [3, 0], label 0; the mean over T is [2, 0]
_OUT = torch.tensor([[[1.0, 0.0]], [[3.0, 0.0]]], dtype=torch.float64)
_Y = torch.tensor([0])


def test_ce_is_the_cross_entropy_of_the_mean_output():
    loss, rate = mean_ce_loss(_OUT, _Y)
    assert torch.equal(rate, torch.tensor([[2.0, 0.0]], dtype=torch.float64))
    assert loss.item() == pytest.approx(math.log(1 + math.exp(-2)), rel=1e-12)  # -log softmax([2, 0])[0]


def test_label_smoothing_moves_eps_of_the_target_to_the_uniform_distribution():
    eps = 0.2
    p0, p1 = 1 / (1 + math.exp(-2)), 1 / (1 + math.exp(2))
    want = -((1 - eps + eps / 2) * math.log(p0) + (eps / 2) * math.log(p1))
    assert mean_ce_loss(_OUT, _Y, eps)[0].item() == pytest.approx(want, rel=1e-12)


def test_tet_is_every_steps_cross_entropy_averaged_plus_lambda_times_the_mse_to_phi():
    """(1 - lambda) * mean_t CE(O(t), y) + lambda * mean (O - phi)^2 (Deng et al., ICLR 2022)."""
    l_tet = (math.log(1 + math.exp(-1)) + math.log(1 + math.exp(-3))) / 2
    l_mse = ((1 - 1) ** 2 + (0 - 1) ** 2 + (3 - 1) ** 2 + (0 - 1) ** 2) / 4  # 1.5, towards phi = 1
    loss, rate = tet_loss(_OUT, _Y, lamb=0.1, phi=1.0)
    assert loss.item() == pytest.approx(0.9 * l_tet + 0.1 * l_mse, rel=1e-12)
    assert torch.equal(rate, _OUT.mean(0))
    assert tet_loss(_OUT, _Y, lamb=0.0)[0].item() == pytest.approx(l_tet, rel=1e-12)  # no regulariser
    l_mse0 = (1 + 0 + 9 + 0) / 4  # towards phi = 0
    assert tet_loss(_OUT, _Y, lamb=0.5, phi=0.0)[0].item() == pytest.approx(0.5 * l_tet + 0.5 * l_mse0, rel=1e-12)


def test_tet_equals_a_loop_over_the_steps_with_torchs_losses():
    out, y = torch.randn(4, 6, 5, dtype=torch.float64), torch.randint(0, 5, (6,))
    ce, mse = torch.nn.CrossEntropyLoss(label_smoothing=0.1), torch.nn.MSELoss()
    ref = (1 - 1e-3) * sum(ce(out[t], y) for t in range(4)) / 4 + 1e-3 * mse(out, torch.full_like(out, 1.0))
    assert torch.allclose(tet_loss(out, y, 0.1)[0], ref, rtol=1e-12, atol=0)


@pytest.mark.parametrize("name", LOSSES)
def test_each_losss_per_sample_form_averages_to_its_batch_loss(name):
    loss = Loss(name, label_smoothing=0.0 if name == "mse" else 0.1, tet_lambda=0.2, tet_phi=0.5)
    out, y = torch.rand(3, 7, 10, dtype=torch.float64), torch.randint(0, 10, (7,))
    value, rate = loss(out, y, 10)
    per_sample, rate2 = loss.per_sample(out, y, 10)
    assert per_sample.shape == (7,) and torch.equal(rate, rate2) and torch.equal(rate, out.mean(0))
    assert torch.allclose(per_sample.mean(), value, rtol=1e-12, atol=0)


def test_the_default_loss_is_the_papers_mse_computed_as_before():
    out, y = (torch.rand(5, 7, 10) < 0.3).float(), torch.randint(0, 10, (7,))
    assert torch.equal(Loss()(out, y, 10)[0], rate_mse_loss(out, y, 10)[0])
    assert torch.equal(Loss().per_sample(out, y, 10)[0], per_sample_rate_mse(out, y, 10)[0])
    with pytest.raises(ValueError, match="loss 'nll': unknown; valid: mse, ce, tet"):
        Loss("nll")


def test_ce_and_tet_of_half_precision_outputs_are_taken_in_fp32():
    out, y = torch.randn(2, 3, 4).to(torch.bfloat16), torch.tensor([0, 1, 2])
    assert per_sample_mean_ce(out, y)[0].dtype == torch.float32
    assert per_sample_tet(out, y)[0].dtype == torch.float32
