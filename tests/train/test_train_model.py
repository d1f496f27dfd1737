"""``plif train --model FILE.py:FACTORY``: a network written as nn.Module code trains and resumes bit for
bit as a notation run does; every bad reference is refused before training, in one line naming the
file, the factory and what was wrong, with nothing written to --out."""
import hashlib
import json
import sys

import pytest
import torch

from plif.cli.main import main
from plif.models.factories import file_module_name
from plif.runs import load_run, read_metrics
from plif.train import TrainConfig, train

from plif_testing import quiet, train_killed_at_step, without_times

# the tiny notation network of the other tests (c4k3s1-BN-PLIF-MPk4s4-DP-FC100-PLIF-APk10s10 without the
# dropout), written by hand with its own forward
TINY_MODEL = '''
import torch
from torch import nn
from plif import PLIF
from plif.layers import TimeFolded, Voting


class Tiny(nn.Module):
    def __init__(self, channels, side, classes):
        super().__init__()
        self.conv = TimeFolded(nn.Conv2d(channels, 4, 3, padding=1, bias=False))
        self.bn = TimeFolded(nn.BatchNorm2d(4))
        self.sn1 = PLIF()
        self.pool = TimeFolded(nn.MaxPool2d(4))
        self.fc = TimeFolded(nn.Linear(4 * (side // 4) ** 2, classes * 10, bias=False))
        self.sn2 = PLIF()
        self.vote = Voting(10)

    def forward(self, x):  # [T, B, C, H, W] -> [T, B, classes]
        x = self.pool(self.sn1(self.bn(self.conv(x))))
        return self.vote(self.sn2(self.fc(x.flatten(2))))


def make(input_shape, num_classes):
    return Tiny(input_shape[0], input_shape[1], num_classes)


def needs_more(input_shape, depth):
    return Tiny(input_shape[0], input_shape[1], 10)


def raises(T):
    raise RuntimeError("out of ideas")


def not_a_module():
    return 42


def wrong_width(input_shape):
    return Tiny(input_shape[0], input_shape[1], 7)


def wrong_time(input_shape, num_classes):
    return nn.Sequential(Tiny(input_shape[0], input_shape[1], num_classes), TimeFolded(nn.Identity()),
                         _Mean())


class _Mean(nn.Module):
    def forward(self, x):
        return x.mean(0)


NOT_CALLABLE = 3


def exits_zero():
    import sys
    sys.exit(0)


def exits_three():
    import sys
    sys.exit(3)


def reseeds(input_shape, num_classes):
    torch.manual_seed(0)  # a factory that seeds its own initialisation
    return make(input_shape, num_classes)


def reseeds_randomly(input_shape, num_classes):
    torch.seed()
    return make(input_shape, num_classes)


def builds_then_raises(input_shape, num_classes, T):
    from plif.models.residual import sew_resnet18
    sew_resnet18(input_shape, num_classes, T)  # fused PLIF layers: they would load (compile) the kernels
    raise RuntimeError("out of ideas")
'''


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "tiny_model.py"
    path.write_text(TINY_MODEL)
    return path


def _cfg(root, out, model, **kw):
    return TrainConfig(**{"dataset": "fashion-mnist", "model": model, "T": 2, "batch_size": 20, "device": "cpu",
                          "epochs": 2, "lr": 5e-3, "t_max": 2, "eval_batch_size": 32, "max_train_samples": 80,
                          "data_dir": str(root), "out": str(out), **kw})


def test_a_model_from_a_file_trains_and_a_killed_run_resumes_bit_for_bit(model_file, tiny_fashion, tmp_path,
                                                                           monkeypatch):
    ref = f"{model_file}:make"
    full = train(_cfg(tiny_fashion, tmp_path / "full", ref), log=quiet)
    rows = read_metrics(full)
    assert [r["epoch"] for r in rows] == [1, 2] and len(rows[0]["taus"]) == 2  # tau of both PLIF modules
    assert rows[0]["firing_rates"].keys() == {"sn1", "sn2"}  # named by their modules
    config = json.loads((full / "config.json").read_text())
    assert config["model"] == ref and config["network"] is None

    train_killed_at_step(_cfg(tiny_fashion, tmp_path / "killed", ref), 6, monkeypatch)  # in epoch 2 (4 steps an epoch)
    resumed = train(_cfg(tiny_fashion, tmp_path / "killed", ref), resume=True, log=quiet)
    assert without_times(read_metrics(resumed)) == without_times(rows)
    a = torch.load(full / "checkpoints" / "last.pt", weights_only=True)["model"]
    b = torch.load(resumed / "checkpoints" / "last.pt", weights_only=True)["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    net, _ = load_run(full, "last")  # the factory again, the weights loaded
    assert type(net).__name__ == "Tiny" and all(torch.equal(v, a[k]) for k, v in net.state_dict().items())


def test_the_command_line_trains_evaluates_and_resumes_a_model_run_and_refuses_what_needs_the_notation(
        model_file, tiny_fashion, tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    argv = ["train", "--model", f"{model_file}:make", "--T", "2", "--batch-size", "20", "--epochs", "1",
            "--max-train-samples", "40", "--device", "cpu", "--data-dir", str(tiny_fashion), "--out", str(out)]
    assert main(argv) == 0
    capsys.readouterr()
    monkeypatch.delitem(sys.modules, file_module_name(model_file))  # as in a new process: not imported already
    assert main(["eval", str(out)]) == 2  # a run folder from elsewhere imports no code unless trusted
    err = capsys.readouterr().err
    assert "model" in err and f"--trust-module {model_file}" in err
    assert main(["eval", str(out), "--trust-module", "tiny_model"]) == 2  # a file is trusted by its path only
    assert "the module name 'tiny_model' you trust does not trust a file" in capsys.readouterr().err
    assert main(["eval", str(out), "--trust-module", str(model_file)]) == 0
    assert "accuracy A: " in capsys.readouterr().out
    assert main(["train", "--resume", str(out), "--epochs", "2", "--trust-module", str(model_file)]) == 0
    assert [r["epoch"] for r in read_metrics(out)] == [1, 2]
    capsys.readouterr()
    assert main(["stats", str(out), "--samples", "20", "--trust-module", str(model_file)]) == 0  # counted by hooks
    shown = capsys.readouterr().out
    assert f"network: --model {model_file}:make" in shown and "sn2" in shown and "energy per sample" in shown
    assert main(["plot", "encoder", str(out), "--out", str(tmp_path / "figs"), "--samples", "2",
                 "--trust-module", str(model_file)]) == 0  # the first neuron (sn1) of any network
    assert json.loads((tmp_path / "figs" / "encoder_rate_grid.json").read_text())["network"] == f"--model {model_file}:make"
    capsys.readouterr()
    assert main(["export", str(out), "--nir", str(tmp_path / "n.nir"), "--trust-module", str(model_file)]) == 0
    assert f"wrote {tmp_path / 'n.nir'} (NIR for norse" in capsys.readouterr().out  # verified by re-import


def test_a_file_that_arrives_inside_a_run_folder_is_not_trusted_by_its_name(model_file, tiny_fashion, tmp_path,
                                                                             capsys, monkeypatch):
    """Issue 53.3: a foreign run folder whose config names ``RUN/code/tiny_model.py:make`` was run by
    ``plif eval RUN --trust-module tiny_model`` (the user trusted *their* tiny_model).  A file is trusted
    by its path, and a trusted file that changed since the run trained is refused."""
    out = tmp_path / "run"
    assert main(["train", "--model", f"{model_file}:make", "--T", "2", "--batch-size", "20", "--epochs", "1",
                 "--max-train-samples", "40", "--device", "cpu", "--data-dir", str(tiny_fashion), "--out", str(out)]) == 0
    monkeypatch.delitem(sys.modules, file_module_name(model_file))  # as in a new process: not imported already
    config = json.loads((out / "config.json").read_text())
    assert config["model_sha256"] == hashlib.sha256(model_file.read_bytes()).hexdigest()
    foreign = out / "code" / "tiny_model.py"  # the same name, other code: it leaves a mark when it runs
    foreign.parent.mkdir()
    foreign.write_text(f"import pathlib\npathlib.Path({str(tmp_path / 'pwned')!r}).write_text('ran')\n" + TINY_MODEL)
    (out / "config.json").write_text(json.dumps({**config, "model": f"{foreign}:make", "model_sha256": None}))
    (out / "checkpoints" / "last.pt").unlink()  # no fallback copy of the config
    capsys.readouterr()
    for trust in (["--trust-module", "tiny_model"], ["--trust-module", str(model_file)], []):
        assert main(["eval", str(out), *trust]) == 2
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        assert len(err) == 1 and f"runs the file {foreign}" in err[0] and "inside the run folder" in err[0], err
        assert not (tmp_path / "pwned").exists()
    # the user's own file, trusted by its path, but edited since the run trained: refused, not run
    (out / "config.json").write_text(json.dumps(config))
    model_file.write_text(TINY_MODEL + "\n# edited\n")
    assert main(["eval", str(out), "--trust-module", str(model_file)]) == 2
    assert f"model file {model_file} changed since the run was trained" in capsys.readouterr().err


@pytest.mark.parametrize("factory, why", [
    ("nowhere", "has no attribute 'nowhere'"),
    ("NOT_CALLABLE", "NOT_CALLABLE in {file} is a int, not a function or class"),
    ("needs_more", "the factory needs 'depth', which plif cannot give"),
    ("raises", "the factory raised RuntimeError: out of ideas"),
    ("exits_zero", "the factory called sys.exit(0)"),
    ("exits_three", "the factory called sys.exit(3)"),
    ("not_a_module", "the factory returned a int, not a torch.nn.Module"),
    ("wrong_width", "its output for the dataset's input [2, 2, 1, 28, 28] is [2, 2, 7], not [T, B, classes] = [2, 2, 10]"),
    ("wrong_time", "its output for the dataset's input [2, 2, 1, 28, 28] is [2, 10], not [T, B, classes]"),
])
def test_a_bad_factory_is_refused_before_training_naming_the_file_and_the_factory(
        factory, why, model_file, tiny_fashion, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(ValueError) as e:
        train(_cfg(tiny_fashion, out, f"{model_file}:{factory}"), log=quiet)
    line = str(e.value)
    assert "\n" not in line and line.startswith(f"--model {model_file}:{factory}: ")
    assert why.format(file=model_file) in line
    assert not out.exists()


@pytest.mark.parametrize("code", ["0", "3", "None", "'bye'"])
def test_a_factory_or_its_module_that_calls_sys_exit_is_refused_on_the_command_line(code, model_file, tiny_fashion,
                                                                                    tmp_path, capsys):
    """Issue 53.4: ``sys.exit(0)`` in a factory ended plif train with status 0, nothing trained and nothing
    said; ``sys.exit(3)`` with 3 and no word.  Now exit status 2, one line naming the factory, no run folder."""
    exits_at_import = tmp_path / "exits_at_import.py"
    exits_at_import.write_text(f"import sys\nsys.exit({code})\ndef make():\n    pass\n")
    exits = tmp_path / "exits.py"
    exits.write_text(f"import sys\ndef make():\n    sys.exit({code})\n")
    out = tmp_path / "run"
    for ref, why in ((f"{exits}:make", f"the factory called sys.exit({code})"),
                     (f"{exits_at_import}:make", f"importing {exits_at_import} called sys.exit({code})")):
        argv = ["train", "--model", ref, "--T", "2", "--device", "cpu", "--data-dir", str(tiny_fashion), "--out", str(out)]
        assert main(argv) == 2
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        assert err == [f"plif train: error: --model {ref}: {why}"]
        assert not out.exists()


@pytest.mark.parametrize("factory", ["reseeds", "reseeds_randomly", "make"])
def test_two_seeds_give_two_networks_though_the_factory_reseeds_torch(factory, model_file, tiny_fashion, tmp_path):
    """Issue 53.4: a factory calling ``torch.manual_seed(0)`` made ``--seed 1`` and ``--seed 2`` one network;
    a reseed inside is now derived from plif's seed, so one seed is still one network (a resume rebuilds it)."""
    from plif.train import resolve_config
    from plif.train.session import setup_model

    def weights(seed):
        cfg = resolve_config(_cfg(tiny_fashion, tmp_path / "run", f"{model_file}:{factory}", seed=seed, memory="none"))
        net = setup_model(cfg, torch.device("cpu"))
        return torch.cat([p.detach().flatten() for p in net.parameters()])

    one, two = weights(1), weights(2)
    assert not torch.equal(one, two) and torch.equal(one, weights(1))
    torch.manual_seed(5)  # put back: a plain seed again
    a = torch.rand(3)
    torch.default_generator.manual_seed(5)
    assert torch.equal(a, torch.rand(3))


def test_a_factory_that_raises_is_said_before_any_kernel_is_compiled(model_file, tiny_fashion, tmp_path):
    """Issue 53.13: a factory that builds fused PLIF layers, then raises, was reported only after the first
    kernel build (197 s on a loaded machine).  The "compiler" here leaves a mark when it is run at all."""
    import os
    import subprocess

    cxx = tmp_path / "cxx"
    cxx.write_text(f"#!/bin/sh\ntouch {tmp_path / 'compiled'}\nexit 1\n")
    cxx.chmod(0o755)
    env = {**os.environ, "CXX": str(cxx), "PLIF_CACHE_DIR": str(tmp_path / "cache")}
    ref = f"{model_file}:builds_then_raises"
    r = subprocess.run([sys.executable, "-m", "plif", "train", "--model", ref, "--T", "2", "--device", "cpu",
                        "--data-dir", str(tiny_fashion), "--out", str(tmp_path / "run")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and f"--model {ref}: the factory raised RuntimeError: out of ideas" in r.stderr
    assert not (tmp_path / "compiled").exists() and not (tmp_path / "run").exists()


def test_a_file_that_does_not_import_or_is_missing_is_refused_in_one_line(tmp_path, tiny_fashion, capsys):
    bad = tmp_path / "broken.py"
    bad.write_text("import torch\ndef make(:\n")
    out = tmp_path / "run"
    base = ["train", "--T", "2", "--device", "cpu", "--data-dir", str(tiny_fashion), "--out", str(out)]
    for ref, why in ((f"{bad}:make", f"importing {bad} failed: SyntaxError"),
                     (f"{tmp_path / 'absent.py'}:make", f"{tmp_path / 'absent.py'}: no such file"),
                     ("no_such_package_xyz.nets:make", "importing module no_such_package_xyz.nets failed: "
                                                       "ModuleNotFoundError"),
                     ("unknown-name", "not a registered model name")):
        assert main([*base, "--model", ref]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"--model {ref}" in err[0] and why in err[0], err
        assert not out.exists()


def test_notation_options_and_a_network_do_not_go_with_a_model(model_file, tiny_fashion, tmp_path):
    ref = f"{model_file}:make"
    with pytest.raises(ValueError, match="--network 'FC10-PLIF' and --model .*: give one of them"):
        train(_cfg(tiny_fashion, tmp_path / "a", ref, network="FC10-PLIF"), log=quiet)
    with pytest.raises(ValueError, match="--neuron lif has no effect with --model"):
        train(_cfg(tiny_fashion, tmp_path / "b", ref, neuron="lif"), log=quiet)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.parametrize("given", [["--tau0", "2"], ["--tau0", "3"], ["--detach-reset"], ["--no-detach-reset"],
                                   ["--encoder", "direct"], ["--neuron", "plif"], ["--no-per-channel-tau"]])
def test_a_notation_option_given_with_a_model_is_refused_at_its_default_value_too(given, tiny_fashion, tmp_path, capsys):
    """Issue 53.10: ``--model sew-resnet18 --tau0 2`` was accepted, ``--tau0 3`` refused: the command line
    knows what was typed, so any value of an option that has no effect is refused."""
    out = tmp_path / "run"
    argv = ["train", "--model", "sew-resnet18", "--T", "2", "--device", "cpu", "--data-dir", str(tiny_fashion),
            "--out", str(out), *given]
    assert main(argv) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    flag = given[0] + (f" {float(given[1]):g}" if given[0] == "--tau0" else f" {given[1]}" if len(given) > 1 else "")
    assert len(err) == 1 and f"{flag} has no effect with --model" in err[0], err
    assert not out.exists()


def test_a_registered_name_and_a_module_reference_build_the_same_network(model_file, monkeypatch, tmp_path):
    from plif.models import factories

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(factories.MODEL_FACTORIES, "tiny-test", "tiny_model:make")
    torch.manual_seed(0)
    a = factories.build_model("tiny-test", (1, 28, 28), 10, 2)
    torch.manual_seed(0)
    b = factories.build_model("tiny_model:make", (1, 28, 28), 10, 2)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert factories.model_module("tiny_model:make") == "tiny_model" == factories.model_module(f"{model_file}:make")
    assert factories.model_module("tiny-test") is None  # the registry is code running already: nothing to trust


def test_the_model_is_fused_per_memory_keeping_its_state_dict(model_file, tiny_fashion, tmp_path):
    """--memory fused (the default) runs the model's conv -> BN -> PLIF as the fused block (plif.fuse);
    --memory none trains the layers as written; both from the same seeded weights and state-dict keys."""
    from plif import fused_blocks
    from plif.train import resolve_config
    from plif.train.session import setup_model

    cfg = resolve_config(_cfg(tiny_fashion, tmp_path / "run", f"{model_file}:make"))
    fused = setup_model(cfg, torch.device("cpu"))
    composed = setup_model(resolve_config(_cfg(tiny_fashion, tmp_path / "run", f"{model_file}:make",
                                                    memory="none")), torch.device("cpu"))
    assert fused_blocks(fused) == [("conv", "bn", "sn1")] and fused_blocks(composed) == []
    a, b = fused.state_dict(), composed.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_memory_none_trains_a_zoo_model_as_written_though_its_factory_fuses(tiny_fashion, tmp_path):
    """The residual zoo's factories fuse as they build; ``--model sew-resnet18 --memory none`` kept that
    fusion (the --model set-up skipped plif.fuse for the "none" preset) instead of the layers as written."""
    from plif import fused_blocks
    from plif.train import resolve_config
    from plif.train.session import setup_model

    composed = setup_model(resolve_config(_cfg(tiny_fashion, tmp_path / "run", "sew-resnet18",
                                                    memory="none")), torch.device("cpu"))
    assert fused_blocks(composed) == []
    fused = setup_model(resolve_config(_cfg(tiny_fashion, tmp_path / "run", "sew-resnet18")), torch.device("cpu"))
    assert fused_blocks(fused) and fused.state_dict().keys() == composed.state_dict().keys()
