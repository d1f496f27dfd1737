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
