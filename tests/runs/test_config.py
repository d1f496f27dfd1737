"""A run's stored config is read in one place (plif.runs.config): its format, what older runs wrote,
the surrogate it names, and the copy in last.pt when config.json is damaged."""
import ast
import json
import sys
from pathlib import Path

import pytest
import torch

import plif
from plif.runs import config as stored
from plif.runs import load_run, read_config_json, read_run_config


def _rewrite(run, **changes):
    cfg = json.loads((run / "config.json").read_text())
    cfg.update(changes)
    (run / "config.json").write_text(json.dumps(cfg))
    return cfg


def test_the_legacy_backend_among_the_network_keywords_is_dropped(run_dir):
    run, net = run_dir
    _rewrite(run, network_kwargs={"backend": "triton", "tau0": 2.0})
    assert read_run_config(run)["network_kwargs"] == {"tau0": 2.0}
    loaded, config = load_run(run)
    assert "backend" not in config["network_kwargs"] and {m.backend for m in loaded.neuron_layers()} == {"auto"}


def test_format_errors_name_the_file_and_reports_read_what_is_there(run_dir):
    run, _ = run_dir
    cfg = _rewrite(run)
    del cfg["T"]
    (run / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=r"config.json: missing key 'T' \(a run config needs network, input_shape"):
        read_run_config(run)
    assert read_config_json(run) == cfg  # a report reads an old or hand-written run as it is
    _rewrite(run, T=6, network_kwargs=[1])
    with pytest.raises(ValueError, match=r"config.json: network_kwargs must be an object, got \[1\]"):
        read_run_config(run)
    (run / "config.json").write_text("[1]")
    for read in (read_run_config, read_config_json):
        with pytest.raises(ValueError, match="config.json: expected a JSON object, got list"):
            read(run)


def test_the_check_gets_the_config_and_names_the_file(run_dir):
    run, _ = run_dir
    seen = []
    read_run_config(run, check=lambda d, source: seen.append((d["T"], source)))
    assert seen == [(6, str(run / "config.json"))]


def test_the_copy_in_last_pt_stands_in_for_a_damaged_config_json_only_when_asked(run_dir):
    run, _ = run_dir
    copy = json.loads((run / "config.json").read_text())
    torch.save({"model": {}, "config": copy}, run / "checkpoints" / "last.pt")
    (run / "config.json").write_text("{garbage")
    with pytest.raises(ValueError, match="config.json: invalid JSON at line 1"):
        read_run_config(run)
    lines = []
    assert read_run_config(run, fallback=True, log=lines.append) == copy
    assert len(lines) == 1 and "invalid JSON" in lines[0] and "using the copy of the config in" in lines[0]

    def refuse(d, source):
        raise ValueError(f"{source}: refused")

    with pytest.raises(ValueError, match="config.json: invalid JSON"):  # the copy fails too: config.json's error
        read_run_config(run, refuse, fallback=True, log=lines.append)
    assert len(lines) == 1


def test_every_surrogate_a_run_names_is_made_usable_by_one_function(run_dir, monkeypatch):
    run, _ = run_dir
    _rewrite(run, surrogate="plif_no_such_module:x", network_kwargs={"surrogate": "plif_no_such_module:x"})
    with pytest.raises(ValueError, match=r"config.json: surrogate 'plif_no_such_module:x' names module "
                                         r"'plif_no_such_module', which plif imports \(running its code\) only when"):
        read_run_config(run)  # untrusted: never imported
    with pytest.raises(ValueError, match=r"config.json: surrogate 'plif_no_such_module:x': cannot import module "
                                         r"'plif_no_such_module'"):
        read_run_config(run, trust_modules=["plif_no_such_module"])
    made = []
    monkeypatch.setattr(stored, "stored_surrogate", lambda spec, source, trust: made.append((spec, Path(source).name)))
    _rewrite(run, surrogate="sigmoid", network_kwargs={"surrogate": "atan"})
    read_run_config(run)
    assert made == [("sigmoid", "config.json"), ("atan", "config.json")]


def test_only_plif_runs_config_reads_a_run_config():
    """Every other module goes through read_run_config / read_config_json: no second reader."""
    src = Path(plif.__file__).parent
    readers = []
    for path in src.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            name = getattr(node, "func", None) and getattr(node.func, "id", getattr(node.func, "attr", None))
            if name == "read_json_file" and node.args and ast.unparse(node.args[0]).endswith(".config"):
                readers.append(path.relative_to(src).as_posix())
    assert readers == ["runs/config.py"]


@pytest.mark.parametrize("spec", ["this:x", "antigravity:x", "json.tool:x"])
def test_a_module_a_run_names_is_not_imported_unless_trusted(run_dir, spec, capsys, monkeypatch):
    """``this`` prints the Zen of Python and ``antigravity`` opens a browser when imported."""
    run, _ = run_dir
    module = spec.partition(":")[0]
    monkeypatch.delenv("PLIF_TRUST_MODULES", raising=False)
    monkeypatch.delitem(sys.modules, module, raising=False)
    _rewrite(run, surrogate=spec)
    for trust in ((), ["thisx", "antigravity.sub", "jsonx"]):  # a name that only starts alike trusts nothing
        with pytest.raises(ValueError, match=f"names module '{module}', which plif imports .* --trust-module {module},"):
            read_run_config(run, trust_modules=trust)
    assert module not in sys.modules and capsys.readouterr() == ("", "")
    if module == "json.tool":  # trusting a package trusts its submodules
        with pytest.raises(ValueError, match="module 'json.tool' registers no surrogate 'x'"):
            read_run_config(run, trust_modules=["json"])
        assert module in sys.modules
