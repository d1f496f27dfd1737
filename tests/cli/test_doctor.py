"""``plif doctor``: one report of the machine (issue 45, item 8), checked here with ``--quick``."""
import json
import re

import pytest

from plif.cli.main import main
from plif.kernels import check, cpu_build


@pytest.fixture(scope="module")
def library():
    if cpu_build.load_library() is None:
        pytest.skip(f"no CPU kernel library here: {cpu_build.BUILD_ERROR}")
    return cpu_build.loaded_library()


def _report(capsys, *argv):
    code = main(["doctor", "--quick", *argv])
    return code, capsys.readouterr().out


def test_the_report_names_paths_checks_versions_and_the_cache(library, capsys, monkeypatch):
    monkeypatch.setenv("PLIF_CACHE_DIR", str(library.parents[2]))  # the cache the suite built
    code, out = _report(capsys, "--json")
    r = json.loads(out)
    assert code == 0, r
    cpu = r["devices"][0]
    assert cpu["device"] == "cpu" and cpu["defaults"]["neuron backend (auto)"]["float32"] == "cpu"
    assert cpu["defaults"]["fused block (memory fused)"]["float32"] == "cpu"
    from plif.layers.precision import native_bf16  # the precision --amp auto (the default) picks here

    precision = "bf16" if native_bf16() else "fp32"
    assert all(line.endswith(f"memory fused, {precision}") for line in cpu["defaults"]["plif train"]), cpu["defaults"]
    assert [c["kernel"] for c in cpu["checks"]] == ["cpu neuron", "cpu block"]
    assert all(c["ran"] == c["cases"] > 0 and c["equal"] == c["ran"] and not c["failed"] for c in cpu["checks"])
    assert {"torch", "triton", "compiler", "cuda", "plif", "python"} <= set(r["versions"])
    assert {"path": str(library), "bytes": library.stat().st_size, "state": "ok", "loaded": True, "problem": False,
            "remedy": None} in r["cache"]["libraries"]
    code, text = _report(capsys)
    assert code == 0 and text.startswith("plif doctor: paste this whole report into an issue\n")
    assert "check cpu neuron" in text and "cases equal the reference" in text and text.rstrip().endswith(
        "verdict: every kernel checked equals its reference, the cache is whole")


def test_a_damaged_library_and_a_differing_kernel_are_reported_and_exit_1(library, tmp_path, capsys, monkeypatch):
    folder = tmp_path / "kernels" / "0123456789abcdef"
    folder.mkdir(parents=True)
    damaged = folder / library.name
    damaged.write_bytes(library.read_bytes()[: library.stat().st_size // 3])
    (folder / (library.name + ".json")).write_text(json.dumps({"size": library.stat().st_size, "sha256": "0" * 64}))
    monkeypatch.setenv("PLIF_CACHE_DIR", str(tmp_path))
    real = check.run_case
    monkeypatch.setattr(check, "run_case", lambda case, *a, **k: {**real(case, *a, **k), "ok": False, "g_x": 0.5})
    code, text = _report(capsys)
    assert code == 1
    assert f"{damaged} is damaged: {library.stat().st_size // 3} bytes where {library.stat().st_size} were built" in text
    assert "    FAIL PLIF-" in text and "g_x=0.5" in text
    assert re.search(r"verdict: cpu neuron on cpu: [1-9]\d* case\(s\) differ; .*is damaged", text), text
    assert f"problem: remove it with rm -r '{folder}'" in text


def test_an_older_plifs_unrecorded_library_is_a_note_with_its_remedy(library, tmp_path, capsys, monkeypatch):
    # an older plif wrote no size/hash record beside its library; this plif never loads it (issue 53)
    folder = tmp_path / "kernels" / "0123456789abcdef"
    folder.mkdir(parents=True)
    (folder / library.name).write_bytes(library.read_bytes())
    monkeypatch.setenv("PLIF_CACHE_DIR", str(tmp_path))
    code, text = _report(capsys)
    assert code == 0, text
    assert f"note: never loaded by this plif; to free its space: rm -r '{folder}'" in text
    assert text.rstrip().endswith("the cache is whole")


def test_a_budget_must_be_positive(capsys):
    assert main(["doctor", "--budget", "0"]) == 2
    assert "--budget 0: must be a positive number of seconds" in capsys.readouterr().err
