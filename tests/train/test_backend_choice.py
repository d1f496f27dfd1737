"""The neuron backend is how a network runs, not what it is: a run trained with a GPU kernel
evaluates, exports and resumes on a CPU-only machine."""
import json

import torch

from plif.cli.main import main
from plif.runs import load_run, read_metrics
from plif_testing import tiny_train_argv


def test_run_trained_with_triton_evaluates_exports_and_resumes_on_cpu(tiny_fashion, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(tiny_train_argv(tiny_fashion, out, epochs=1)) == 0
    config = json.loads((out / "config.json").read_text())
    assert "backend" not in config["network_kwargs"]  # not part of the network
    # what a run trained with --backend triton on a GPU leaves (older runs kept it in network_kwargs too)
    config["backend"] = config["network_kwargs"]["backend"] = "triton"
    (out / "config.json").write_text(json.dumps(config))

    net, _ = load_run(out, "last")
    assert {m.backend for m in net.neuron_layers()} == {"auto"}
    assert net(torch.rand(2, 1, 28, 28)).shape == (2, 2, 10)  # triton on CPU tensors would fail here
    capsys.readouterr()
    assert main(["eval", str(out), "--device", "cpu"]) == 0
    assert main(["export", str(out), "--which", "last", "--nir", str(tmp_path / "net.nir")]) == 0

    # resume: the stored GPU kernel is refused on the CPU in one line; --backend changes it like --device
    assert main(["train", "--resume", str(out), "--epochs", "2"]) == 2
    err = capsys.readouterr().err
    assert "--backend 'triton'" in err and "--backend auto" in err and len(err.strip().splitlines()) == 1
    assert main(["train", "--resume", str(out), "--epochs", "2", "--backend", "cpu"]) == 0
    assert [m["epoch"] for m in read_metrics(out)] == [1, 2]
    assert json.loads((out / "config.json").read_text())["backend"] == "cpu"
