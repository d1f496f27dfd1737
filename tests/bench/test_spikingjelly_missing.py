"""A SpikingJelly that fails to import (``--no-deps`` without loguru) is named in the bench tables, not dropped."""
import sys

import pytest

from plif.bench import neuron as bn
from plif.bench.spikingjelly import spikingjelly_unavailable
from plif.bench.train import bench_train, format_train_table


@pytest.fixture
def sj_without_loguru(tmp_path, monkeypatch):
    """A ``spikingjelly`` package on sys.path whose ``activation_based`` fails the way 2.0 does without loguru."""
    pkg = tmp_path / "spikingjelly" / "activation_based"
    pkg.mkdir(parents=True)
    (tmp_path / "spikingjelly" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'loguru'\", name='loguru')\n")
    for name in [m for m in sys.modules if m.split(".")[0] == "spikingjelly"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(tmp_path))


def test_reason_names_the_missing_dependency(sj_without_loguru):
    assert spikingjelly_unavailable() == "ModuleNotFoundError: No module named 'loguru'"


def test_not_installed(monkeypatch):
    for name in [m for m in sys.modules if m.startswith("spikingjelly.")]:  # imported by an earlier test
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "spikingjelly", None)  # import of it raises ModuleNotFoundError
    assert spikingjelly_unavailable() == "not installed"


def test_neuron_table_says_why(sj_without_loguru, monkeypatch):
    monkeypatch.setitem(bn.CASES, "tiny", (2, 2, 3))
    logged = []
    rows = bn.run_neuron_bench(["tiny"], ["spikingjelly"], "cpu", reps=1, budget_s=0.1, log=logged.append)
    sj = [r for r in rows if r.backend == "spikingjelly"]
    assert [r.pass_ for r in sj] == ["fwd", "fwd+bwd"] and all(r.time_ms is None for r in sj)
    assert "| tiny | spikingjelly | fwd | unavailable: ModuleNotFoundError: No module named 'loguru' |" in bn.format_table(rows)
    assert any("loguru" in line and "pip install" in line for line in logged)


def test_train_table_says_why(sj_without_loguru):
    rows = bench_train("fashion-mnist", (2,), "cpu", ["spikingjelly"], warmup=0, iters=1, T=1)
    assert [r.variant for r in rows] == ["spikingjelly"] and rows[0].ms_per_step is None
    assert rows[0].ratio_to_naive is None and rows[0].ratio_to_spikingjelly is None
    assert "spikingjelly                2 unavailable: ModuleNotFoundError: No module named 'loguru'" in format_train_table(rows, "t")
