"""How a run executes: the whole-step CUDA graph and compile decided for the device when left out (one
line on CUDA when auto turns one off, nothing on the CPU), TF32 on by default, and config.json
recording what ran, which a resume and plif eval read back."""
import dataclasses
import json

import pytest
import torch

from plif.cli.main import main
from plif.switches import switched
from plif.runs import read_metrics
from plif.train import TrainConfig, resolve_config
from plif.train.resume import config_diff
from plif.train.speed import resolve_speed
from plif_testing import edit_stored_config, tiny_train_argv


def _cfg(**kw):
    return resolve_config(TrainConfig(**{"preset": "paper", **kw}))


def test_auto_is_off_on_the_cpu_and_says_nothing():
    cfg, notes = resolve_speed(_cfg(), "cpu")
    assert (cfg.cuda_graph, cfg.compile, notes) == (False, False, [])
    cfg, notes = resolve_speed(_cfg(compile=True, cuda_graph=True), "cpu")  # explicit: kept (and refused later)
    assert (cfg.cuda_graph, cfg.compile, notes) == (True, True, [])


@pytest.mark.parametrize("dataset", ["fashion-mnist", "mnist"])
def test_the_paper_step_on_cuda_is_compiled_inside_the_graph(dataset):
    """``plif train --preset paper`` on a GPU gets the step the H200 measured fastest."""
    cfg, notes = resolve_speed(_cfg(dataset=dataset), "cuda")
    assert (cfg.cuda_graph, cfg.compile, cfg.tf32, notes) == (True, True, True, [])


def test_a_network_not_measured_compiled_gets_the_graph_and_one_line():
    for cfg in (_cfg(preset="cpu"), _cfg(dataset="dvs128-gesture"), _cfg(T=4), _cfg(memory="exact")):
        out, notes = resolve_speed(cfg, "cuda")
        assert (out.cuda_graph, out.compile) == (True, False) and len(notes) == 1, notes
        assert notes[0].startswith("torch.compile: off, ") and notes[0].endswith("(--compile / --no-compile decide it)")
    assert "was measured eagerly only" in resolve_speed(_cfg(memory="exact"), "cuda")[1][0]


@pytest.mark.parametrize("kw,world,why", [
    ({}, 2, "torchrun runs 2 processes and the captured step is single-process"),
    ({"checkpoint_every": 100}, 1, "--checkpoint-every saves within an epoch"),
    ({"log": "tensorboard"}, 1, "forward hooks, which a replayed graph does not run"),
    ({"checkpoint_blocks": True}, 1, "torch.utils.checkpoint"),
])
def test_what_the_graph_cannot_replay_turns_auto_off_in_one_line(kw, world, why):
    cfg, notes = resolve_speed(_cfg(**kw), "cuda", world)
    assert (cfg.cuda_graph, cfg.compile) == (False, False)
    assert len(notes) == 1 and notes[0].startswith("CUDA graph: off, ") and why in notes[0]
    assert notes[0].endswith("training eagerly (--cuda-graph / --no-cuda-graph decide it)")


def test_explicit_values_are_kept_and_silent():
    cfg, notes = resolve_speed(_cfg(cuda_graph=False), "cuda")
    assert (cfg.cuda_graph, cfg.compile, notes) == (False, False, [])
    cfg, notes = resolve_speed(_cfg(preset="cpu", compile=True, memory="low"), "cuda")
    assert (cfg.cuda_graph, cfg.compile, notes) == (True, True, [])


def test_a_config_stored_before_tf32_existed_ran_with_torchs_defaults():
    """Runs made before the setting ran with torch's defaults (fp32 matmuls, TF32 convolutions): None,
    which plif.device.set_tf32 sets; TF32, like the rest of how a run executes, may change on a resume."""
    old = dataclasses.asdict(_cfg(cuda_graph=False, compile=False))
    del old["tf32"]
    assert TrainConfig.from_dict(old).tf32 is None
    assert config_diff(old, {**old, "tf32": True}) == config_diff(old, {**old, "tf32": False}) == []
    assert config_diff(old, {**old, "tf32": False, "compile": True, "cuda_graph": True}) == []


def test_config_json_records_what_ran_and_resume_and_eval_honour_it(tiny_fashion, tmp_path, capsys, tf32_flags):
    """Resolved values, never "auto"; a GPU switch that was on is recorded and a resume without it is
    refused; the stored tf32 is what a --resume and plif eval set (a --no-tf32 run stays fp32)."""
    out = tmp_path / "run"
    with switched(channels_last=True):
        assert main(tiny_train_argv(tiny_fashion, out, epochs=1, tf32=False)) == 0
    config = json.loads((out / "config.json").read_text())
    assert (config["cuda_graph"], config["compile"], config["tf32"]) == (False, False, False)
    assert config["gpu_switches"] == {"channels_last": True} and tf32_flags() == (False, False)
    capsys.readouterr()
    assert main(["train", "--resume", str(out), "--epochs", "2"]) == 2
    assert "gpu_switches: run has {'channels_last': True}, now None" in capsys.readouterr().err
    with switched(channels_last=True):
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        assert main(["train", "--resume", str(out), "--epochs", "2"]) == 0
    assert [m["epoch"] for m in read_metrics(out)] == [1, 2] and tf32_flags() == (False, False)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    assert main(["eval", str(out), "--device", "cpu"]) == 0 and tf32_flags() == (False, False)


def test_the_tf32_flag_says_it_does_nothing_on_the_cpu(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--tf32, --no-tf32" in text and "no effect on the CPU;" in text and "a resume may change it [yes]" in text
    assert "--cuda-graph, --no-cuda-graph" in text and "[auto: on CUDA in a single process" in text


def test_memory_left_to_plif_is_the_composed_layers_only_where_they_are_compiled_inside_the_graph():
    """``--memory`` auto: ``none`` where the measured compile-inside-the-graph step runs (Inductor fuses the
    composed layers around the neuron kernels), the fused conv blocks everywhere else; a value given stays."""
    assert resolve_speed(_cfg(), "cuda")[0].memory == "none"  # the Fashion-MNIST paper step, compiled in the graph
    assert resolve_speed(_cfg(), "cpu")[0].memory == "fused"
    assert resolve_speed(_cfg(dataset="dvs128-gesture"), "cuda")[0].memory == "fused"
    assert resolve_speed(_cfg(compile=False), "cuda")[0].memory == "fused"
    assert resolve_speed(_cfg(cuda_graph=False), "cuda")[0].memory == "fused"
    assert resolve_speed(_cfg(memory="exact"), "cuda")[0].memory == "exact"
    assert resolve_speed(_cfg(memory="fused"), "cuda")[0].compile is False  # fused blocks were measured eagerly only


def _forget_tf32(run):
    """Make ``run`` look made before the tf32 setting."""
    edit_stored_config(run, lambda config: config.pop("tf32"))


def test_a_run_made_before_tf32_continues_and_keeps_torchs_defaults(tiny_fashion, tmp_path, tf32_flags):
    """The same --time-limit command continues a run made before the setting (it was refused: "tf32: run
    has False, now True"), as plif ablate continues a sweep; a --resume and plif eval of such a run set
    torch's defaults, which it ran with (fp32 matmuls, TF32 convolutions), not fp32 convolutions."""
    out = tmp_path / "run"
    assert main(tiny_train_argv(tiny_fashion, out, epochs=1, time_limit="1h")) == 0
    _forget_tf32(out)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    assert main(["eval", str(out), "--device", "cpu"]) == 0 and tf32_flags() == (False, True)
    assert main(["train", "--resume", str(out), "--epochs", "2"]) == 0 and tf32_flags() == (False, True)
    assert json.loads((out / "config.json").read_text())["tf32"] is None
    _forget_tf32(out)
    assert main(tiny_train_argv(tiny_fashion, out, epochs=3, time_limit="1h")) == 0  # TF32 on, as the command says
    assert [m["epoch"] for m in read_metrics(out)] == [1, 2, 3] and tf32_flags() == (True, True)
    assert json.loads((out / "config.json").read_text())["tf32"] is True


def test_what_plif_decided_for_a_cuda_run_is_decided_again_where_it_resumes(tiny_fashion, tmp_path, capsys):
    """config.json lists the settings plif decided (speed_auto); --resume decides those again for its own
    device, so a run whose graph, compile and memory were decided on CUDA continues on the CPU (it was
    refused: "--cuda-graph needs a CUDA device ... leave it out", which the user never gave), and a
    value given is kept and no longer listed."""
    out = tmp_path / "run"
    assert main(tiny_train_argv(tiny_fashion, out, epochs=1, compile=False)) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["speed_auto"] == ["cuda_graph", "memory"] and config["compile"] is False

    def as_on_cuda(config):  # what the paper step decided on CUDA records
        config.update(cuda_graph=True, compile=True, memory="none", speed_auto=["cuda_graph", "compile", "memory"])

    edit_stored_config(out, as_on_cuda)
    assert main(["train", "--resume", str(out), "--epochs", "2", "--device", "cpu"]) == 0, capsys.readouterr().err
    config = json.loads((out / "config.json").read_text())
    assert (config["cuda_graph"], config["compile"], config["memory"]) == (False, False, "fused")
    assert config["speed_auto"] == ["cuda_graph", "compile", "memory"]
    assert main(["train", "--resume", str(out), "--epochs", "3", "--memory", "exact"]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["memory"] == "exact" and config["speed_auto"] == ["cuda_graph", "compile"]
    assert [m["epoch"] for m in read_metrics(out)] == [1, 2, 3]


def test_a_stored_speed_auto_that_is_not_a_list_of_those_settings_is_refused():
    from plif.train.config import check_stored

    stored = {**resolve_config(TrainConfig(preset="paper")).to_dict(), "speed_auto": ["lr"]}
    with pytest.raises(ValueError, match=r"config.json: speed_auto must be a list of cuda_graph, compile, memory, got \['lr'\]"):
        check_stored(stored, "config.json")
