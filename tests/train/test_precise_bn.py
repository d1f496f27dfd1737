import pytest
import torch
from torch import nn

from plif.train.precise_bn import precise_bn_note, reestimate_bn, steps_to_forget


def test_an_epoch_too_short_to_forget_the_running_statistics_needs_them_again():
    net = nn.Sequential(nn.Conv2d(1, 3, 3), nn.BatchNorm2d(3))
    assert steps_to_forget(0.1) == 44 and 0.9 ** 44 <= 0.01 < 0.9 ** 43
    assert precise_bn_note(net, 8) and precise_bn_note(net, 43) and precise_bn_note(net, 44) is None
    assert precise_bn_note(nn.Sequential(nn.Linear(2, 2)), 1) is None  # no BatchNorm


def test_the_note_says_the_whole_rule_in_one_sentence():
    """The log line was cut off mid-sentence ("re-estimated after each", issue 40)."""
    net = nn.Sequential(nn.BatchNorm1d(2), nn.BatchNorm1d(2, momentum=0.5))
    note = precise_bn_note(net, 8)
    assert note == ("precise BN: 8 steps an epoch are too few for BatchNorm's running averages (they need 44 to "
                    "forget the previous epoch's); they are re-estimated on the training split after each epoch, before it is evaluated and saved")
    assert "\n" not in note and precise_bn_note(net, 44) is None
    assert precise_bn_note(nn.Sequential(nn.Linear(2, 2)), 1) is None


def test_the_running_statistics_become_those_of_the_data_and_nothing_else_changes():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 6), nn.Dropout(0.5), nn.BatchNorm1d(6), nn.BatchNorm1d(6, momentum=0.3)).train()
    weights = {k: v.clone() for k, v in net.state_dict().items() if "running" not in k and "tracked" not in k}
    xs = [torch.randn(16, 4) * 3 + 1 for _ in range(4)]
    reestimate_bn(net, [(x, None) for x in xs])
    with torch.no_grad():
        h = net[0](torch.cat(xs))  # dropout was off
        per_batch = [net[0](x) for x in xs]
    bn = net[2]
    assert torch.allclose(bn.running_mean, h.mean(0), atol=1e-5)
    assert torch.allclose(bn.running_var, torch.stack([b.var(0) for b in per_batch]).mean(0), atol=1e-5)
    assert net.training and bn.momentum == 0.1 and net[3].momentum == 0.3  # left as they were
    assert all(torch.equal(v, net.state_dict()[k]) for k, v in weights.items())


def test_a_world_of_processes_ends_with_the_mean_of_their_statistics():
    bn = nn.BatchNorm1d(2)
    reestimate_bn(bn, [(torch.tensor([[1.0, 2.0], [3.0, 4.0]]), None)], all_reduce=lambda t: t * 3, world=2)
    assert bn.running_mean.tolist() == pytest.approx([3.0, 4.5])  # each of 2 ranks' sum counted: x 3 / 2
