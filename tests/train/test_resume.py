import dataclasses
import math

import pytest
import torch

from plif.train import TrainConfig, resolve_config
from plif.train.resume import _carried_period, _stretch_schedule


def _stored(**kw):
    return resolve_config(TrainConfig(**kw)).to_dict()


def test_a_period_that_followed_the_epochs_follows_them_on_resume():
    stored = _stored(epochs=2)  # cpu preset: t_max = epochs
    again = TrainConfig.from_dict(stored)
    assert _carried_period(stored, dataclasses.replace(again, epochs=5)) == 5  # as the CLI passes it
    assert _carried_period(stored, resolve_config(TrainConfig(epochs=5))) == 5  # resolved anew
    assert _carried_period(stored, again) is None  # same epochs: nothing changes


@pytest.mark.parametrize("stored", [dict(preset="paper", epochs=64), dict(epochs=2, t_max=3)])
def test_a_period_of_its_own_stays(stored):
    stored = _stored(**stored)
    assert _carried_period(stored, dataclasses.replace(TrainConfig.from_dict(stored), epochs=100)) is None


@pytest.mark.parametrize("tensor_lr", [False, True])
def test_a_stretched_schedule_goes_on_from_the_closed_form(tensor_lr):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.Adam([p], lr=torch.tensor(1e-3) if tensor_lr else 1e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=2)
    for _ in range(2):
        opt.step()
        sched.step()
    assert float(opt.param_groups[0]["lr"]) == pytest.approx(0.0, abs=1e-12)  # where a 2-epoch run ends
    _stretch_schedule(sched, 4)
    lrs = [float(opt.param_groups[0]["lr"])]
    for _ in range(2):
        opt.step()
        sched.step()
        lrs.append(float(opt.param_groups[0]["lr"]))
    assert lrs == pytest.approx([1e-3 * (1 + math.cos(math.pi * t / 4)) / 2 for t in (2, 3, 4)], rel=1e-6, abs=1e-12)
    assert torch.is_tensor(opt.param_groups[0]["lr"]) == tensor_lr
