"""Training recipes (issue 56): --loss, --label-smoothing, --tet-lambda/--tet-phi, --optimizer, --momentum,
--nesterov, --weight-decay, --warmup-epochs: validated before anything is written, recorded, resumed exactly;
old runs without them resume with the paper's recipe."""
import dataclasses

import pytest
import torch

from plif.runs import read_metrics
from plif.train import TrainConfig, resolve_config, train
from plif.train.config import ABSENT_MEANS, RECIPE_FIELDS
from plif.train.loss import Loss
from plif.train.optim import Recipe
from plif.train.resume import config_diff

from plif_testing import quiet, tiny_train_config, train_killed_at_step, without_times


@pytest.mark.parametrize("kw,message", [
    (dict(weight_decay=-1e-4), "--weight-decay must be at least 0, got -0.0001"),
    (dict(optimizer="sgd", momentum=1.0), r"--momentum must be in \[0, 1\), got 1"),
    (dict(optimizer="sgd", momentum=-0.1), r"--momentum must be in \[0, 1\), got -0.1"),
    (dict(optimizer="sgd", momentum=0.0, nesterov=True), "--nesterov needs a momentum"),
    (dict(loss="ce", label_smoothing=1.0), r"--label-smoothing must be in \[0, 1\), got 1"),
    (dict(loss="tet", label_smoothing=-0.1), r"--label-smoothing must be in \[0, 1\)"),
    (dict(loss="tet", tet_lambda=1.0), r"--tet-lambda must be in \[0, 1\)"),
    (dict(loss="tet", tet_phi=float("nan")), "--tet-phi must be a finite number, got nan"),
    (dict(warmup_epochs=-1), "--warmup-epochs must be at least 0, got -1"),
    (dict(epochs=2, warmup_epochs=2), "--warmup-epochs 2: must be below --epochs 2"),
    (dict(epochs=4, t_max=2, warmup_epochs=3), "--warmup-epochs 3: must be below the cosine period --t-max 2"),
    (dict(loss="mse", label_smoothing=0.1), "--label-smoothing 0.1 has no effect with --loss mse"),
    (dict(loss="ce", tet_lambda=0.01), "--tet-lambda 0.01 has no effect with --loss ce"),
    (dict(tet_phi=0.5), "--tet-phi 0.5 has no effect with --loss mse"),
    (dict(momentum=0.5), "--momentum 0.5 has no effect with --optimizer adam"),
    (dict(nesterov=True), "--nesterov has no effect with --optimizer adam"),
    (dict(loss="nll"), "--loss 'nll': unknown; valid: mse, ce, tet"),
    (dict(optimizer="lamb"), "--optimizer 'lamb': unknown; valid: adam, sgd"),
    (dict(lr=-0.1), "--lr must be positive, got -0.1"),
])
def test_a_bad_recipe_is_refused_in_one_line_naming_the_option(kw, message):
    with pytest.raises(ValueError, match=message) as e:
        resolve_config(TrainConfig(**kw))
    assert "\n" not in str(e.value)


def test_the_recipe_is_recorded_and_read_back():
    cfg = resolve_config(TrainConfig(loss="tet", label_smoothing=0.1, tet_lambda=0.05, tet_phi=0.5, optimizer="sgd",
                                     momentum=0.8, nesterov=True, weight_decay=5e-4, epochs=3, warmup_epochs=1))
    d = cfg.to_dict()
    assert {k: d[k] for k in RECIPE_FIELDS} == dict(loss="tet", label_smoothing=0.1, tet_lambda=0.05, tet_phi=0.5,
                                                    optimizer="sgd", momentum=0.8, nesterov=True, weight_decay=5e-4,
                                                    warmup_epochs=1)
    assert TrainConfig.from_dict(d) == cfg
    assert cfg.loss_function() == Loss("tet", 0.1, 0.05, 0.5)
    assert cfg.recipe() == Recipe("sgd", cfg.lr, 0.8, True, 5e-4, 1, 3)


def test_a_run_recorded_before_the_recipe_existed_resumes_with_the_papers():
    new = resolve_config(TrainConfig()).to_dict()
    old = {k: v for k, v in new.items() if k not in RECIPE_FIELDS}
    assert {k: ABSENT_MEANS[k] for k in RECIPE_FIELDS} == dict(loss="mse", label_smoothing=0.0, tet_lambda=1e-3,
                                                               tet_phi=1.0, optimizer="adam", momentum=0.9,
                                                               nesterov=False, weight_decay=0.0, warmup_epochs=0)
    assert config_diff(old, new) == []
    assert TrainConfig.from_dict(old) == TrainConfig.from_dict(new)
    assert config_diff(old, {**new, "loss": "ce"}) == ["  loss: run has 'mse', now 'ce'"]


def test_each_recipe_setting_is_a_flag_of_plif_train_with_its_help():
    import argparse

    from plif.cli.config_flags import add_config_flags, given_settings

    parser = argparse.ArgumentParser()
    assert set(RECIPE_FIELDS) <= set(add_config_flags(parser))
    args = parser.parse_args(["--loss", "ce", "--label-smoothing", "0.1", "--optimizer", "sgd", "--momentum", "0.8",
                              "--nesterov", "--weight-decay", "1e-4", "--warmup-epochs", "1"])
    assert given_settings(args) == dict(loss="ce", label_smoothing=0.1, optimizer="sgd", momentum=0.8, nesterov=True,
                                        weight_decay=1e-4, warmup_epochs=1)
    fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
    assert all(fields[name].metadata["help"] for name in RECIPE_FIELDS)


@pytest.mark.parametrize("recipe", [
    dict(loss="ce", label_smoothing=0.1, optimizer="sgd", lr=0.05, nesterov=True, weight_decay=1e-4, warmup_epochs=1),
    dict(loss="tet", tet_lambda=0.05, weight_decay=1e-4),
], ids=["ce-sgd-warmup", "tet-adam"])
def test_a_recipe_run_killed_and_resumed_ends_where_an_uninterrupted_one_does(recipe, tiny_fashion, tmp_path,
                                                                              monkeypatch):
    kw = dict(max_train_samples=80, max_test_samples=20, epochs=3, t_max=3, **recipe)  # 4 steps an epoch
    full = train(tiny_train_config(tiny_fashion, tmp_path / "full", **kw), log=quiet)
    train_killed_at_step(tiny_train_config(tiny_fashion, tmp_path / "killed", **kw), 6, monkeypatch)
    resumed = train(tiny_train_config(tiny_fashion, tmp_path / "killed", **kw), resume=True, log=quiet)
    rows = read_metrics(full)
    assert without_times(read_metrics(resumed)) == without_times(rows)
    a = torch.load(full / "checkpoints" / "last.pt", weights_only=True)
    b = torch.load(resumed / "checkpoints" / "last.pt", weights_only=True)
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert a["scheduler"] == b["scheduler"]
    if recipe.get("warmup_epochs"):  # half the rate in the warm-up epoch, then the cosine over the 2 left
        assert [r["lr"] for r in rows] == pytest.approx([0.025, 0.05, 0.025])
    else:
        assert rows[0]["train_loss"] > 0.5  # cross-entropy, not the MSE of rates (below 0.1 on 10 classes)
