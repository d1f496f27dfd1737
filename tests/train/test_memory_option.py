import json

import pytest
import torch

from plif.cli.main import main
from plif.runs import read_metrics
from plif.train import TrainConfig
from plif_testing import TINY_NET, tiny_train_argv


def _train(root, out, *extra):
    return main(tiny_train_argv(root, out, *extra, epochs=1, max_train_samples=100, max_test_samples=40))


def _same_run(a_dir, b_dir):
    a = torch.load(a_dir / "checkpoints" / "last.pt", weights_only=False)["model"]
    b = torch.load(b_dir / "checkpoints" / "last.pt", weights_only=False)["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    strip = lambda rows: [{k: v for k, v in r.items() if "time" not in k and "per_s" not in k} for r in rows]
    assert strip(read_metrics(a_dir)) == strip(read_metrics(b_dir))


def test_exact_savings_train_to_bit_identical_weights(tiny_fashion, tmp_path):
    """--memory exact --checkpoint-blocks (checkpointed blocks run the composed layers) changes what
    is kept for backward, not what is computed, against --memory none; --memory exact against the
    fused default likewise."""
    assert _train(tiny_fashion, tmp_path / "plain", "--memory", "none") == 0
    assert _train(tiny_fashion, tmp_path / "saving", "--memory", "exact", "--checkpoint-blocks") == 0
    cfg = json.loads((tmp_path / "saving" / "config.json").read_text())
    assert cfg["memory"] == "exact" and cfg["checkpoint_blocks"] is True
    _same_run(tmp_path / "plain", tmp_path / "saving")
    assert _train(tiny_fashion, tmp_path / "fused") == 0
    assert _train(tiny_fashion, tmp_path / "exact", "--memory", "exact") == 0
    assert json.loads((tmp_path / "fused" / "config.json").read_text())["memory"] == "fused"
    _same_run(tmp_path / "fused", tmp_path / "exact")


def test_unknown_memory_option_is_refused():
    with pytest.raises(ValueError, match="unknown --memory 'most'"):
        TrainConfig(memory="most").memory_options()
    assert TrainConfig(memory="all", checkpoint_blocks=True).memory_options().h_bf16
    low = TrainConfig(memory="low").memory_options()
    assert low.chunk_first_block and low.recompute_bn and not low.h_bf16
