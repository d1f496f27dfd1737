import json

import pytest

from plif.cli.main import main


def test_stats_on_random_input_writes_json(run_dir, tmp_path, capsys):
    run, _ = run_dir
    out = tmp_path / "stats.json"
    assert main(["stats", str(run), "--random", "--samples", "12", "--batch-size", "5", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "SynOps/sample" in text and "Horowitz" in text
    d = json.loads(out.read_text())
    assert d["samples"] == 12 and d["totals_per_sample"]["synops"] > 0


def test_stats_without_dataset_files_fails_cleanly(run_dir, tmp_path, capsys):
    run, _ = run_dir
    cfg = json.loads((run / "config.json").read_text())
    del cfg["dataset"]
    (run / "config.json").write_text(json.dumps(cfg))
    assert main(["stats", str(run)]) == 2
    assert "names no 'dataset'" in capsys.readouterr().err


def test_export_nir_and_bad_run(run_dir, tmp_path, capsys):
    pytest.importorskip("nir")
    run, _ = run_dir
    out = tmp_path / "out" / "net.nir"
    assert main(["export", str(run), "--nir", str(out)]) == 0
    assert out.is_file() and "wrote" in capsys.readouterr().out
    assert main(["export", str(tmp_path / "missing"), "--nir", str(tmp_path / "x.nir")]) == 2
    assert not (tmp_path / "x.nir").exists()


def test_export_nir_with_dt(run_dir, tmp_path, capsys):
    nir = pytest.importorskip("nir")
    run, _ = run_dir
    assert main(["export", str(run), "--nir", str(tmp_path / "ms.nir"), "--dt", "1e-3"]) == 0
    assert "dt = 0.001" in capsys.readouterr().out
    assert nir.read(tmp_path / "ms.nir").metadata["dt"] == 1e-3
    assert main(["export", str(run), "--nir", str(tmp_path / "bad.nir"), "--dt", "-1"]) == 2
    assert "dt must be a positive" in capsys.readouterr().err
    assert not (tmp_path / "bad.nir").exists()
