"""Run folders written by plif 611aecf (issue 54: the model path changes, the runs trained before it keep
working): a notation run (``--network c4k3s1-BN-PLIF-MPk4s4-FC20-PLIF-APk2s2``) and a ``--model`` run (the
same layers written by hand, ``--model plif_611aecf_tiny:tiny`` from ``tests/data/run_611aecf_model``), each one epoch on 640 (batches of 64, lr 0.005)
Fashion-MNIST samples, T = 4, tested on 200.  Today's code loads each, evaluates it to the accuracy it
recorded, resumes it for a second epoch, and gives its statistics and its NIR file."""
import json
import shutil
from pathlib import Path

import pytest
import torch

from plif.cli.main import main
from plif.runs import load_run, read_metrics
from plif.train.evaluate_run import evaluate_run

DATA = Path(__file__).parents[1] / "data"
FMNIST = Path("/usr/share/datasets/fashion-mnist")
needs_fmnist = pytest.mark.skipif(not (FMNIST / "t10k-images-idx3-ubyte.gz").is_file(),
                                  reason="dataset-fashion-mnist not installed")


def _copy(name: str, tmp_path: Path, monkeypatch) -> tuple[Path, list[str]]:
    """The stored run copied (resuming writes into it); a ``--model`` run's module (in the folder) is
    importable and trusted."""
    run = tmp_path / name
    shutil.copytree(DATA / name, run)
    if json.loads((run / "config.json").read_text()).get("model") is None:
        return run, []
    monkeypatch.syspath_prepend(str(run))
    return run, ["plif_611aecf_tiny"]


@pytest.mark.parametrize("name", ["run_611aecf", "run_611aecf_model"])
def test_a_run_folder_from_611aecf_loads_with_every_weight(name, tmp_path, monkeypatch):
    run, trust = _copy(name, tmp_path, monkeypatch)
    stored = torch.load(run / "checkpoints" / "best_test.pt", weights_only=True)["model"]
    net, config = load_run(run, trust_modules=trust)
    assert not net.training and config["T"] == 4
    assert net.state_dict().keys() == stored.keys()
    assert all(torch.equal(net.state_dict()[k], v) for k, v in stored.items())
    out = net(torch.rand(4, 3, 1, 28, 28))  # [T, B, ...] frames
    assert out.shape == (4, 3, 10)


@pytest.mark.slow
@needs_fmnist
@pytest.mark.parametrize("name", ["run_611aecf", "run_611aecf_model"])
def test_a_run_folder_from_611aecf_evaluates_resumes_and_gives_its_statistics(name, tmp_path, monkeypatch):
    run, trust = _copy(name, tmp_path, monkeypatch)
    recorded = json.loads((run / "summary.json").read_text())["accuracy_A"]["test_acc"]
    (result,) = evaluate_run(run, device="cpu", trust_modules=trust)
    assert result.which == "best_test" and result.samples == 200
    assert result.accuracy == pytest.approx(recorded, abs=1 / 200)  # at most one sample flips (rounding)
    assert recorded > 0.3  # the stored network learnt something: chance is 0.1

    flags = [a for f in trust for a in ("--trust-module", f)]
    assert main(["train", "--resume", str(run), "--epochs", "2", "--device", "cpu", *flags]) == 0
    rows = read_metrics(run)
    assert [r["epoch"] for r in rows] == [1, 2]
    assert json.loads((run / "summary.json").read_text())["epochs_run"] == 2

    stats = tmp_path / "stats.json"
    assert main(["stats", str(run), "--samples", "32", "--batch-size", "16", "--json", str(stats), *flags]) == 0
    assert json.loads(stats.read_text())["samples"] == 32
    pytest.importorskip("nir")  # a --model run exports too (issue 54 part 2), verified by re-import
    assert main(["export", str(run), "--nir", str(tmp_path / "net.nir"), *flags]) == 0
    assert (tmp_path / "net.nir").is_file()
