"""--data-on-device: streamed batches (reader threads over the memory-mapped cache) equal resident ones
for the same seed, and ``auto`` streams what does not fit."""
import pytest
import torch

from plif.runs import read_metrics
from plif.train import TrainConfig, train
from plif.data import pipeline as data_mod
from plif.train.config import resolve_config
from plif.data.pipeline import epoch_generator, fits_on_device, load_train_data


pytestmark = pytest.mark.nmnist(train=6, test=2)  # the nmnist_root of tests/conftest.py


def _batches(cfg, mode, workers=None):
    """Every batch of two epochs, the test and the validation split, drawn lazily (a streamed
    batch lives until the next is drawn) and cloned."""
    cfg = resolve_config(TrainConfig(**{**cfg, "data_on_device": mode}))
    data = load_train_data(cfg.data_options(), torch.device("cpu"))
    data.workers = workers
    assert data.train.streamed == (mode == "no")
    for epoch in (0, 1):
        for x, y in data.train_batches(8, epoch_generator(cfg.seed, epoch)):
            yield x.clone(), y.clone()
    for split, bs in ((data.test, 7), (data.val, 5)):
        for x, y in data.eval_batches(split, bs):
            yield x.clone(), y.clone()


@pytest.mark.parametrize("workers", [1, 3])
def test_streamed_event_batches_equal_resident(nmnist_root, workers):
    root, _ = nmnist_root
    cfg = dict(dataset="nmnist", data_dir=str(root), T=3, val_split=0.2, max_train_samples=40, device="cpu")
    resident, streamed = list(_batches(cfg, "yes")), list(_batches(cfg, "no", workers))
    # the stratified cap keeps 4 of each digit, val holds out 1 of each: train 30 / 8 per epoch, test 20 / 7,
    # val 10 / 5
    assert len(resident) == len(streamed) == 2 * 3 + 3 + 2
    for (xa, ya), (xb, yb) in zip(resident, streamed):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)


def test_streamed_augmented_static_batches_equal_resident(tiny_fashion):
    # MNIST's random affine augmentation draws from the epoch generator on the device in both paths
    cfg = dict(dataset="mnist", data_dir=str(tiny_fashion), T=2, val_split=0.15, device="cpu")
    for (xa, ya), (xb, yb) in zip(_batches(cfg, "yes"), _batches(cfg, "no", 2)):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)


def test_auto_streams_what_does_not_fit(nmnist_root, monkeypatch):
    root, _ = nmnist_root
    assert fits_on_device(50, 100) and not fits_on_device(51, 100)
    cfg = resolve_config(TrainConfig(dataset="nmnist", data_dir=str(root), T=3))
    monkeypatch.setattr(data_mod, "free_memory", lambda device: 10**12)
    assert not load_train_data(cfg.data_options(), torch.device("cpu")).train.streamed
    monkeypatch.setattr(data_mod, "free_memory", lambda device: 1000)
    data = load_train_data(cfg.data_options(), torch.device("cpu"))
    assert data.train.streamed and data.test.streamed
    with pytest.raises(ValueError, match="--data-on-device 'maybe': unknown; valid: auto, yes, no"):
        resolve_config(TrainConfig(dataset="nmnist", data_on_device="maybe"))


def test_training_streamed_gives_the_same_run(nmnist_root, tmp_path):
    from plif_testing import TINY_NET, tiny_train_config

    root, runs = nmnist_root[0], {}
    for mode in ("yes", "no"):
        cfg = tiny_train_config(root, tmp_path / mode, dataset="nmnist", network=TINY_NET.replace("MPk4s4", "MPk8s8"),
                                epochs=2, batch_size=10, t_max=2, data_on_device=mode)
        runs[mode] = train(cfg, log=lambda *a, **k: None)
    keys = ("train_loss", "train_acc", "test_acc", "taus")
    assert [[m[k] for k in keys] for m in read_metrics(runs["yes"])] == \
           [[m[k] for k in keys] for m in read_metrics(runs["no"])]
    a = torch.load(runs["yes"] / "checkpoints" / "last.pt", weights_only=True)["model"]
    b = torch.load(runs["no"] / "checkpoints" / "last.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
