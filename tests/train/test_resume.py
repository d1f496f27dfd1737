import dataclasses
import math
import types

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


def test_restore_loads_the_states_in_place_and_returns_the_progress_it_read(tmp_path):
    """The session is built once, after the restore: restore loads the states in place and hands back
    the config and the run's progress (the rows, where a mid-epoch checkpoint left off)."""
    from plif.runs import RunFolder, save_checkpoint
    from plif.train.distributed import DistInfo
    from plif.train.resume import Restored, restore, resume_state
    from plif.train.session import setup_model, setup_optimizer
    from plif.train.state import Progress

    folder, device = RunFolder(tmp_path), torch.device("cpu")

    def parts(cfg):
        model = setup_model(cfg, device)
        return (model, *setup_optimizer(model, cfg, device))

    cfg = resolve_config(TrainConfig(network="FC20-PLIF-FC100-PLIF-APk10s10", epochs=2, device="cpu"))
    old = parts(cfg)
    with torch.no_grad():
        next(old[0].parameters()).add_(1.0)  # trained: not what a fresh session starts from
    rows = [{"epoch": 1}, {"epoch": 2}]
    old_session = types.SimpleNamespace(model=old[0], optimizer=old[1], scheduler=old[2],
                                        cfg_dict={**cfg.to_dict(), "out": str(folder.path)})
    save_checkpoint(folder.checkpoint("last"), resume_state(old_session, 2, rows))
    new_cfg = dataclasses.replace(cfg, epochs=5)  # --resume --epochs 5: the period follows
    new_dict = {**new_cfg.to_dict(), "out": str(folder.path)}
    new = parts(new_cfg)
    r = restore(folder, new_cfg, new_dict, *new, device, DistInfo(), log=lambda *a: None)
    assert r == Restored(dataclasses.replace(cfg, epochs=5, t_max=5), Progress(tuple(rows)))
    assert r.progress.epoch == 2 and new_dict["t_max"] == 2  # the caller's record is left as it was
    for a, b in zip(old[0].state_dict().values(), new[0].state_dict().values()):
        assert torch.equal(a, b)  # the weights were loaded in place


def test_settings_without_effect_in_a_run_do_not_refuse_its_resume():
    """config_diff compares what has an effect: --per-channel-tau only with PLIF, --tau0 not with IF,
    --max-val-samples only with --val-split (a sweep started before plif ablate gave --per-channel-tau to
    its PLIF entries alone recorded it in its LIF runs)."""
    from plif.train.resume import config_diff

    lif = {"neuron": "lif", "tau0": 2.0, "per_channel_tau": True, "max_val_samples": 5, "val_split": 0.0}
    assert config_diff(lif, {**lif, "per_channel_tau": False, "max_val_samples": None}) == []
    assert config_diff(lif, {**lif, "tau0": 16.0}) == ["  tau0: run has 2.0, now 16.0"]
    assert config_diff({**lif, "neuron": "if"}, {**lif, "neuron": "if", "tau0": 16.0}) == []
    plif = {**lif, "neuron": "plif", "val_split": 0.1}
    assert config_diff(plif, {**plif, "per_channel_tau": False}) == ["  per_channel_tau: run has True, now False"]
    assert config_diff(plif, {**plif, "max_val_samples": 6}) == ["  max_val_samples: run has 5, now 6"]
