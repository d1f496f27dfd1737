"""--log tensorboard writes every epoch's numbers; read back from the event file."""
import pytest

from plif.runs import read_metrics
from plif.train import train

from plif_testing import tiny_train_config


def test_tensorboard_event_file_holds_each_epoch(tiny_fashion, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = train(tiny_train_config(tiny_fashion, tmp_path / "r", epochs=2, batch_size=40, t_max=None,
                                  eval_batch_size=256, val_split=0.2, log="tensorboard"), log=lambda *a: None)
    acc = EventAccumulator(str(out / "tensorboard"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    # one name per layer (its qualified module name) for tau and firing rate alike
    assert {"loss/train", "loss/test", "loss/val", "accuracy/train", "accuracy/test", "accuracy/val", "lr",
            "time/epoch_s", "speed/samples_per_s", "tau/layers.2", "tau/layers.7", "firing_rate/layers.2",
            "firing_rate/layers.7"} <= tags
    assert not any(t.startswith("tau/plif_") for t in tags)
    metrics = read_metrics(out)
    test_acc = acc.Scalars("accuracy/test")
    assert [e.step for e in test_acc] == [1, 2]
    assert [e.value for e in test_acc] == pytest.approx([m["test_acc"] for m in metrics])
    assert [e.value for e in acc.Scalars("loss/val")] == pytest.approx([m["val_loss"] for m in metrics])
    assert [e.value for e in acc.Scalars("speed/samples_per_s")] == pytest.approx([m["samples_per_s"] for m in metrics])
    assert [e.value for e in acc.Scalars("tau/layers.7")] == pytest.approx([m["taus"][1] for m in metrics])
    rates = [e.value for e in acc.Scalars("firing_rate/layers.2")]
    assert all(0.0 <= r <= 1.0 for r in rates) and any(r > 0 for r in rates)
    # the firing rates are in the record too, under the same names
    assert rates == pytest.approx([m["firing_rates"]["layers.2"] for m in metrics])
    assert set(metrics[0]["firing_rates"]) == {"layers.2", "layers.7"}


def test_without_tensorboard_the_error_says_what_to_install(tiny_fashion, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails as if not installed
    with pytest.raises(ValueError, match=r"--log tensorboard needs the tensorboard package: pip install 'plif\[tensorboard\]'"):
        train(tiny_train_config(tiny_fashion, tmp_path / "r", epochs=1, log="tensorboard"), log=lambda *a: None)
    assert not (tmp_path / "r").exists()
