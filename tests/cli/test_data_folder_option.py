"""Every command that reads a dataset folder calls the option ``--data-dir``; ``plif data``'s older
``--root`` stays as its alias (issue 40: ``plif data download --root`` beside ``plif train --data-dir``)."""
import argparse
import re

import pytest

from plif.cli.main import build_parser, main


def _parsers(parser: argparse.ArgumentParser, path: tuple = ()):
    yield " ".join(path), parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, path + (name,))


def _folder_options() -> dict[str, list[str]]:
    """command -> the option strings of its dataset-folder option."""
    found = {}
    for command, parser in _parsers(build_parser()):
        for action in parser._actions:
            if action.dest in ("data_dir", "root") or {"--data-dir", "--root"} & set(action.option_strings):
                found[command] = action.option_strings
    return found


def test_every_command_names_its_dataset_folder_data_dir():
    found = _folder_options()
    assert {"train", "eval", "ablate", "plot", "stats", "data prepare", "data download"} <= found.keys(), found
    for command, options in found.items():
        assert options[0] == "--data-dir", (command, options)
        assert set(options) <= {"--data-dir", "--root"}, (command, options)
    assert {c for c, o in found.items() if "--root" in o} == {"data prepare", "data download"}  # the old name, kept
    # no other spelling of a data folder anywhere
    odd = [(c, o) for c, p in _parsers(build_parser()) for a in p._actions for o in a.option_strings
           if re.fullmatch(r"--(data|dataset)[-_]?(root|folder|path|dir)", o) and o != "--data-dir"]
    assert not odd


@pytest.mark.parametrize("flag", ["--data-dir", "--root"])
def test_data_prepare_reads_the_folder_under_either_name(flag, tiny_fashion, capsys):
    assert main(["data", "prepare", "fashion-mnist", flag, str(tiny_fashion), "--no-download", "--train-only"]) == 0
    assert "fashion-mnist train: samples (200, 1, 28, 28) uint8" in capsys.readouterr().out


@pytest.mark.parametrize("flag", ["--data-dir", "--root"])
def test_data_download_takes_the_folder_under_either_name(flag, tmp_path, capsys):
    """A manual download (DVS128 Gesture) prints its steps for the folder it was given, and the command
    it advises spells the option ``--data-dir``."""
    assert main(["data", "download", "dvs128-gesture", flag, str(tmp_path / "g")]) == 2
    err = capsys.readouterr().err
    assert f"into {tmp_path / 'g'}/" in err and f"plif data download dvs128-gesture --data-dir {tmp_path / 'g'}" in err
