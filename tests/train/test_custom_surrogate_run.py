"""A registered surrogate trains like a built-in: ``--surrogate MODULE:NAME`` on the command line, the
config names it so that --resume, eval, stats and export find it again in a fresh process when the
user trusts the module (issue 39.1: a run folder imports no code by itself), and a run whose module
cannot be imported is refused in one line naming the module."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from plif.cli.main import main
from plif.surrogate import CUSTOM_SURROGATES
from plif.train import TrainConfig
from plif.train.config import resolve_config
from plif_testing import tiny_train_argv

MODULE = """
import pathlib

pathlib.Path(__file__).with_name("imported.marker").write_text("ran")  # what an attacker's code would do
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


def test_eval_stats_and_export_import_the_trusted_module_again(run, tmp_path, monkeypatch):
    config = json.loads((run / "config.json").read_text())
    assert config["surrogate"] == config["network_kwargs"]["surrogate"] == SPEC
    trust = ["--trust-module", "plif_run_surrogates"]
    for argv in (["eval", str(run), "--device", "cpu", *trust], ["stats", str(run), "--samples", "8", "--random", *trust],
                 ["export", str(run), "--nir", str(tmp_path / "net.nir"), "--no-verify"]):
        _forget()  # a fresh process
        with monkeypatch.context() as m:
            if "export" in argv:  # or trusted in the environment
                m.setenv("PLIF_TRUST_MODULES", "numpy, plif_run_surrogates")
            assert main(argv) == 0, argv
        assert "superspike" in CUSTOM_SURROGATES  # found again by importing the module


def test_resume_imports_the_trusted_module_again(run):
    _forget()
    assert main(["train", "--resume", str(run), "--epochs", "2", "--trust-module", "plif_run_surrogates"]) == 0
    assert "superspike" in CUSTOM_SURROGATES
    assert json.loads((run / "config.json").read_text())["surrogate"] == SPEC


# --- issue 39.1: the run folder names the module, the user decides whether it runs ---------------------

def _untouched(code):
    assert "plif_run_surrogates" not in sys.modules and not (code / "imported.marker").exists()


@pytest.mark.parametrize("command", ["eval", "stats", "export", "resume", "plot-encoder", "load_run"])
def test_a_module_the_run_names_is_refused_until_trusted_and_never_runs(run, code, command, tmp_path, capsys):
    _forget()
    (code / "imported.marker").unlink(missing_ok=True)
    argv = {"eval": ["eval", str(run), "--device", "cpu"], "stats": ["stats", str(run), "--random", "--samples", "8"],
            "export": ["export", str(run), "--nir", str(tmp_path / "n.nir")], "resume": ["train", "--resume", str(run)],
            "plot-encoder": ["plot", "encoder", str(run), "--out", str(tmp_path / "fig")]}.get(command)
    if argv is None:
        from plif.runs import load_run

        with pytest.raises(ValueError) as e:
            load_run(run)
        err = str(e.value)
    else:
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert (f"config.json: surrogate {SPEC!r} names module 'plif_run_surrogates', which plif imports (running its "
            "code) only when you trust it: --trust-module plif_run_surrogates, or "
            "PLIF_TRUST_MODULES=plif_run_surrogates (Python: trust_modules=['plif_run_surrogates'])") in err, err
    _untouched(code)
    assert not (tmp_path / "n.nir").exists() and not (tmp_path / "fig").exists()


def test_load_run_takes_trusted_modules_and_a_module_imported_already(run, code, monkeypatch):
    from plif.runs import load_run

    _forget()
    net, config = load_run(run, trust_modules=["plif_run_surrogates"])
    assert config["surrogate"] == SPEC and (code / "imported.marker").exists()
    _forget()
    monkeypatch.setenv("PLIF_TRUST_MODULES", "plif_run_surrogates")
    load_run(run)
    monkeypatch.delenv("PLIF_TRUST_MODULES")
    load_run(run)  # imported in this process already: nothing new runs
    _forget()
    monkeypatch.setenv("PLIF_TRUST_MODULES", "plif_run_surrogates,a b")
    with pytest.raises(ValueError, match=r"PLIF_TRUST_MODULES: 'a b' is neither a module name .* nor a model file's path"):
        load_run(run)


def test_reports_read_the_run_without_importing(run, code, tmp_path):
    from plif.experiments import write_report

    _forget()
    (code / "imported.marker").unlink(missing_ok=True)
    write_report([run], tmp_path / "report")
    assert SPEC in (tmp_path / "report" / "report.md").read_text()
    _untouched(code)


def test_trust_module_is_refused_where_no_run_folder_is_read(tiny_fashion, tmp_path, capsys):
    for argv, why in ((tiny_train_argv(tiny_fashion, tmp_path / "r", "--trust-module", "x"), "is for --resume"),
                      (["export", "--check", str(tmp_path / "f.nir"), "--trust-module", "x"],
                       "--check FILE only reads the file: --trust-module is for plif export RUN"),
                      (["plot", "neuron", "--out", str(tmp_path / "p"), "--trust-module", "x"],
                       "--trust-module: no effect on plot neuron")):
        capsys.readouterr()
        assert main(argv) == 2
        assert why in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
    with pytest.raises(SystemExit):
        main(["eval", str(tmp_path), "--trust-module", "../evil"])
    assert "argument --trust-module: '../evil': a model file's path ends in .py" in capsys.readouterr().err


def test_a_module_in_the_working_directory_is_not_imported_by_python_m_plif(run, tmp_path):
    """``python -m plif`` puts the working directory first on sys.path: a pwnmod.py lying there must not run."""
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(run, work / "run")
    (work / "pwnmod.py").write_text(MODULE)
    config = json.loads((work / "run" / "config.json").read_text())
    config["surrogate"] = config["network_kwargs"]["surrogate"] = "pwnmod:superspike"
    (work / "run" / "config.json").write_text(json.dumps(config))
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src, "PYTHONWARNINGS": "ignore"}
    env.pop("PLIF_TRUST_MODULES", None)
    p = subprocess.run([sys.executable, "-m", "plif", "stats", "run", "--random", "--samples", "4"], cwd=work,
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "names module 'pwnmod'" in p.stderr and "--trust-module pwnmod" in p.stderr, p.stderr
    assert not (work / "imported.marker").exists()


def test_a_trusted_module_is_still_not_imported_from_the_working_directory(run, tmp_path, monkeypatch):
    """Trusting a name trusts an installed module or one on PYTHONPATH, not a file of that name in the
    folder the user is in; ``PYTHONPATH`` naming that folder is the explicit way to use it."""
    from plif.runs import load_run

    work = tmp_path / "work"
    work.mkdir()
    (work / "pwnmod.py").write_text(MODULE)
    shutil.copytree(run, work / "run")
    config = json.loads((work / "run" / "config.json").read_text())
    config["surrogate"] = config["network_kwargs"]["surrogate"] = "pwnmod:superspike"
    (work / "run" / "config.json").write_text(json.dumps(config))
    monkeypatch.chdir(work)
    monkeypatch.syspath_prepend(str(work))  # what python -m does
    monkeypatch.syspath_prepend("")  # and python -c
    monkeypatch.delenv("PYTHONPATH", raising=False)
    try:
        with pytest.raises(ValueError, match=r"cannot import module 'pwnmod' \(ModuleNotFoundError: .*; it must be "
                                             r"installed or on PYTHONPATH \(the working directory is not searched"):
            load_run("run", trust_modules=["pwnmod"])
        assert not (work / "imported.marker").exists() and str(work) in sys.path and "" in sys.path
        monkeypatch.setenv("PYTHONPATH", ".")
        load_run("run", trust_modules=["pwnmod"])
        assert (work / "imported.marker").exists()
    finally:
        sys.modules.pop("pwnmod", None)
        CUSTOM_SURROGATES.pop("superspike", None)


@pytest.mark.parametrize("command", ["eval", "resume"])
def test_a_run_whose_module_cannot_be_imported_is_refused_in_one_line(run, code, command, monkeypatch, capsys):
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(code)])
    _forget()
    capsys.readouterr()
    trust = ["--trust-module", "plif_run_surrogates"]
    argv = ["eval", str(run), "--device", "cpu", *trust] if command == "eval" else ["train", "--resume", str(run), *trust]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    err = err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert (f"surrogate {SPEC!r}: cannot import module 'plif_run_surrogates' (ModuleNotFoundError: "
            "No module named 'plif_run_surrogates'); it must be installed or on PYTHONPATH") in err, err
    assert "using the copy" not in out  # config.json is intact: its copy in last.pt is no way out
