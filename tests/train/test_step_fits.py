"""A training step that cannot fit the memory available is refused before anything runs, in one line
naming --T, the batch and the estimate (issue 53: --encoder latency --T 100000 was OOM-killed at 22 GB,
--T 20000 --batch-size 32 ended in the allocator's raw "[enforce fail at alloc_cpu.cpp:127]")."""
import pytest

from plif.cli.main import main
from plif.train import TrainConfig, resolve_config
from plif.train import checks
from plif.train import session as session_mod

GIB = 2**30


@pytest.fixture
def available(monkeypatch):
    """The memory available, fixed at 16 GiB (the refusal must not depend on the machine running the test)."""
    monkeypatch.setattr(checks, "available_memory", lambda device: (16 * GIB, "this machine has available"))


@pytest.mark.parametrize("encoder, T, batch", [("latency", 100_000, 16), ("direct", 100_000, 16),
                                               ("poisson", 100_000, 16), ("latency", 20_000, 32)])
def test_a_step_beyond_the_available_memory_is_refused_in_one_line(encoder, T, batch, available, tiny_fashion,
                                                                   tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(session_mod, "load_train_data", lambda *a: pytest.fail("data loaded before the check"))
    argv = ["train", "--data-dir", str(tiny_fashion), "--encoder", encoder, "--T", str(T), "--batch-size", str(batch),
            "--device", "cpu", "--out", str(tmp_path / "run")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"plif train: error: --T {T} with --batch-size {batch}: one training step needs at "
                          "least "), err
    assert "of activations kept for backward over the" in err and "with --memory fused" in err, err
    assert err.endswith("more than the 16.0 GiB this machine has available; lower --T or --batch-size"), err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("kw", [dict(preset="paper", dataset="fashion-mnist"), dict(preset="cpu"),
                                dict(preset="paper", dataset="dvs128-gesture"),
                                dict(preset="paper", dataset="cifar10-dvs", memory="none"),
                                dict(preset="cpu", dataset="nmnist", T=64)])
def test_the_usual_configurations_fit_in_a_few_gib(kw, monkeypatch):
    """The paper preset (T 8, batch 16), the cpu preset and DVS128 Gesture at T 20 are not refused with
    8 GiB available (their least step: 0.2, 0.03 and 1.3 GiB)."""
    monkeypatch.setattr(checks, "available_memory", lambda device: (8 * GIB, "this machine has available"))
    cfg = resolve_config(TrainConfig(device="cpu", **kw))
    checks.check_step_fits(checks.meta_network(cfg), cfg)


def test_the_available_memory_is_read_from_the_machine():
    available, where = checks.available_memory("cpu")
    assert available > 0 and where
