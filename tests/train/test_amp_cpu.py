"""``plif train --amp bf16`` on the CPU: bf16 autocast, every neuron on the fused kernel."""
import collections
import json

import pytest
import torch

from plif.cli.main import main
from plif.neurons import dispatch
from plif.runs import read_metrics
from plif_testing import tiny_train_argv


@pytest.fixture
def chosen(monkeypatch):
    """Counts of (backend auto chose, input dtype) over the run."""
    seen = collections.Counter()
    select = dispatch.select_backend

    def spy(x, cfg):
        name = select(x, cfg)
        seen[name, x.dtype] += 1
        return name

    monkeypatch.setattr(dispatch, "select_backend", spy)
    return seen


@pytest.mark.parametrize("memory", ["none", "all"])
def test_bf16_training_runs_on_the_kernel_and_learns(tiny_fashion, tmp_path, chosen, memory):
    out = tmp_path / "run"
    argv = tiny_train_argv(tiny_fashion, out, "--amp", "bf16", "--memory", memory, epochs=3, lr=5e-3, t_max=3,
                           max_test_samples=40)
    assert main(argv) == 0
    assert json.loads((out / "config.json").read_text())["amp"] == "bf16"
    # never bptt; after a linear layer bf16 inputs, after a composed BatchNorm (evaluation, --memory none)
    # its fp32 output (plif.layers.precision)
    assert set(chosen) == {("cpu", torch.bfloat16), ("cpu", torch.float32)}, chosen
    rows = [r for r in read_metrics(out) if "train_loss" in r]
    assert len(rows) == 3 and rows[-1]["train_loss"] < rows[0]["train_loss"], rows
    state = torch.load(out / "checkpoints" / "last.pt", weights_only=False)["model"]
    assert all(v.dtype in (torch.float32, torch.int64) for v in state.values())  # weights, BN stats stay fp32


def test_the_default_amp_auto_records_what_ran(tiny_fashion, tmp_path, chosen, capsys):
    """``--amp`` left out is ``auto``: decided once for this CPU (bf16 where it has native bf16) and
    config.json records the decision, not ``auto``, so a resume elsewhere keeps the run's numerics;
    a config.json made before the field existed means fp32."""
    from plif.layers.precision import native_bf16
    from plif.train import TrainConfig

    out = tmp_path / "run"
    assert main(tiny_train_argv(tiny_fashion, out, epochs=1, max_test_samples=40, amp=None)) == 0
    want = "bf16" if native_bf16() else None
    said = capsys.readouterr().out  # the run says when it trains in bf16
    assert ("test samples on cpu in bf16 (--amp none: fp32); " in said) == (want == "bf16"), said
    assert json.loads((out / "config.json").read_text())["amp"] == want
    assert any(dtype == torch.bfloat16 for _, dtype in chosen) == (want == "bf16")
    old = {k: v for k, v in json.loads((out / "config.json").read_text()).items() if k != "amp"}
    assert TrainConfig.from_dict(old).amp is None
