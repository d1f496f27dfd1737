"""The training flags are generated from TrainConfig: every field has one, in train and ablate."""
import argparse
import dataclasses
import json
from dataclasses import dataclass, field

import pytest

from plif.cli.config_flags import add_config_flags, given_settings
from plif.cli.experiments import ABLATE_EXCLUDES
from plif.cli.main import build_parser, main
from plif.train import TrainConfig


def _options(command):
    sub = next(a for a in build_parser(command)._actions if isinstance(a, argparse._SubParsersAction))
    return {opt for action in sub.choices[command]._actions for opt in action.option_strings}


def _settable():
    return [f for f in dataclasses.fields(TrainConfig) if not f.metadata.get("derived")]


def test_every_config_field_has_a_flag_with_help():
    train, ablate = _options("train"), _options("ablate")
    for f in _settable():
        flag = "--" + f.name.replace("_", "-")
        assert f.metadata.get("help"), f"TrainConfig.{f.name} declares no help"
        assert flag in train, f"plif train has no {flag}"
        if f.name not in ABLATE_EXCLUDES:
            assert flag in ablate, f"plif ablate has no {flag}"
    assert {"--detach-reset", "--no-detach-reset", "--surrogate", "--bn-per-step", "--backend", "--compile",
            "--per-channel-tau"} <= ablate


@dataclass(frozen=True)
class _Future:
    """Fields of the kinds other helpers add (cuda_graph, amp, checkpoint_blocks, ...)."""

    cuda_graph: bool = field(default=False, metadata={"help": "capture the step"})
    amp: str | None = field(default=None, metadata={"help": "mixed precision", "choices": ("bf16", "fp16")})
    checkpoint_blocks: int = field(default=0, metadata={"help": "blocks to recompute"})
    scale: float | None = field(default=None, metadata={"help": "a float"})
    name: str = field(default="x", metadata={"help": "a string"})
    shape: tuple = field(default=(), metadata={"derived": True})


def test_the_generator_handles_every_field_kind():
    p = argparse.ArgumentParser()
    assert add_config_flags(p, cls=_Future) == ["cuda_graph", "amp", "checkpoint_blocks", "scale", "name"]
    args = p.parse_args(["--cuda-graph", "--amp", "bf16", "--checkpoint-blocks", "3", "--scale", "0.5"])
    assert given_settings(args, cls=_Future) == {"cuda_graph": True, "amp": "bf16", "checkpoint_blocks": 3, "scale": 0.5}
    assert given_settings(p.parse_args(["--no-cuda-graph"]), cls=_Future) == {"cuda_graph": False}
    assert given_settings(p.parse_args([]), cls=_Future) == {}
    with pytest.raises(SystemExit):
        p.parse_args(["--amp", "fp8"])
    with pytest.raises(SystemExit):
        p.parse_args(["--checkpoint-blocks", "2.5"])


def test_no_detach_reset_reaches_the_config(tiny_fashion, tmp_path):
    from plif_testing import tiny_train_argv

    out = tmp_path / "r"
    assert main(tiny_train_argv(tiny_fashion, out, "--no-detach-reset", epochs=1, batch_size=40,
                                max_train_samples=80)) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["detach_reset"] is False and config["network_kwargs"]["detach_reset"] is False


def test_version(capsys):
    from plif import __version__

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"plif {__version__}"


def test_eval_of_a_missing_folder_says_not_a_run_folder(tmp_path, capsys):
    assert main(["eval", str(tmp_path / "nope")]) == 2
    assert "not a run folder" in capsys.readouterr().err


@pytest.mark.parametrize("text,message", [
    ('{"network": "FC10", "input_shape": [1], "T": 2\x01}', "config.json: invalid JSON at line 1 column"),
    ('{"network": "FC10", "input_shape": [1], "T": "two"}', "config.json: T must be int or null, got 'two'"),
])
def test_corrupt_config_json_names_the_file(text, message, tmp_path, capsys):
    (tmp_path / "config.json").write_text(text)
    for argv in (["eval", str(tmp_path)], ["train", "--resume", str(tmp_path)], ["stats", str(tmp_path), "--random"]):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and str(tmp_path) in err and "Traceback" not in err


@pytest.mark.parametrize("flag,value", [("--epochs", "\u0661\u0662"), ("--batch-size", "\uff11\uff16"),
                                        ("--lr", "\u0661.5"), ("--epochs", "3.5")])
def test_numbers_are_ascii_digits_refused_in_one_line_while_parsing(flag, value, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", flag, value, "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"argument {flag}" in err and "ASCII digits" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("flag,value,message", [("--time-limit", "-1h", "--time-limit '-1h': not a positive duration"),
                                                ("--lr", "-inf", "--lr must be a finite number, got -inf"),
                                                ("--time-limit", "-1:00:00", "--time-limit '-1:00:00'")])
def test_a_value_starting_with_a_minus_gets_the_options_own_refusal(flag, value, message, tmp_path, capsys):
    """argparse took -1h and -inf for options ("expected one argument") and never asked plif."""
    assert main(["train", flag, value, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert message in err and "expected one argument" not in err and not (tmp_path / "r").exists()
