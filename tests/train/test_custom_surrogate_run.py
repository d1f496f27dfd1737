"""A registered surrogate trains like a built-in: ``--surrogate MODULE:NAME`` on the command line, the
config names it so that --resume, eval, stats and export find it again in a fresh process, and a run
whose module cannot be imported is refused in one line naming the module."""
import json
import sys

import pytest

from plif.cli.main import main
from plif.surrogate import CUSTOM_SURROGATES
from plif.train import TrainConfig
from plif.train.config import resolve_config
from plif_testing import tiny_train_argv

MODULE = """
from plif.surrogate import register_surrogate

register_surrogate("superspike", grad=lambda x, a: 1 / (1 + a * x.abs()) ** 2, default_alpha=10.0)
"""
SPEC = "plif_run_surrogates:superspike"


def _forget():
    """What a fresh process knows: neither the module nor what it registered."""
    sys.modules.pop("plif_run_surrogates", None)
    CUSTOM_SURROGATES.pop("superspike", None)


@pytest.fixture(scope="module")
def code(tmp_path_factory):
    """A folder on sys.path with a module that registers ``superspike`` when imported."""
    folder = tmp_path_factory.mktemp("code")
    (folder / "plif_run_surrogates.py").write_text(MODULE)
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(folder))
        yield folder
    _forget()


@pytest.fixture(scope="module")
def run(code, tiny_fashion, tmp_path_factory):
    """A one-epoch run trained with ``--surrogate plif_run_surrogates:superspike``."""
    out = tmp_path_factory.mktemp("surrogate") / "run"
    with pytest.warns(RuntimeWarning, match=f"surrogate {SPEC!r} declares no closed form of the fused kernels; "
                                            "backend='auto' runs it on 'bptt'"):
        assert main(tiny_train_argv(tiny_fashion, out, "--surrogate", SPEC, epochs=1, max_train_samples=20,
                                    max_test_samples=20)) == 0
    return out


def test_train_config_takes_a_registered_name_and_stores_module_colon_name(code):
    import plif_run_surrogates  # noqa: F401  (registers superspike, as a user's own code would)

    cfg = resolve_config(TrainConfig(surrogate="superspike", device="cpu"))
    assert cfg.surrogate == SPEC and cfg.to_dict()["network_kwargs"]["surrogate"] == SPEC
    with pytest.raises(ValueError, match=r"--surrogate 'relu': unknown; valid: atan, sigmoid, rect, triangle, "
                                         r"superspike, or MODULE:NAME"):
        resolve_config(TrainConfig(surrogate="relu", device="cpu"))
    with pytest.raises(ValueError, match=r"--backend 'cpu': the fused kernels have only their closed-form "
                                         r"surrogates; surrogate 'superspike' runs on bptt"):
        resolve_config(TrainConfig(surrogate="superspike", backend="cpu", device="cpu"))


def test_eval_stats_and_export_import_the_module_again(run, tmp_path):
    config = json.loads((run / "config.json").read_text())
    assert config["surrogate"] == config["network_kwargs"]["surrogate"] == SPEC
    for argv in (["eval", str(run), "--device", "cpu"], ["stats", str(run), "--samples", "8", "--random"],
                 ["export", str(run), "--nir", str(tmp_path / "net.nir"), "--no-verify"]):
        _forget()  # a fresh process
        assert main(argv) == 0, argv
        assert "superspike" in CUSTOM_SURROGATES  # found again by importing the module


def test_resume_imports_the_module_again(run):
    _forget()
    assert main(["train", "--resume", str(run), "--epochs", "2"]) == 0
    assert "superspike" in CUSTOM_SURROGATES
    assert json.loads((run / "config.json").read_text())["surrogate"] == SPEC


@pytest.mark.parametrize("command", ["eval", "resume"])
def test_a_run_whose_module_cannot_be_imported_is_refused_in_one_line(run, code, command, monkeypatch, capsys):
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(code)])
    _forget()
    capsys.readouterr()
    argv = ["eval", str(run), "--device", "cpu"] if command == "eval" else ["train", "--resume", str(run)]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    err = err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert (f"surrogate {SPEC!r}: cannot import module 'plif_run_surrogates' (ModuleNotFoundError: "
            "No module named 'plif_run_surrogates'); it must be installed or on PYTHONPATH") in err, err
    assert "using the copy" not in out  # config.json is intact: its copy in last.pt is no way out
