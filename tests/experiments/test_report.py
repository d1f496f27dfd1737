import json

import pytest

from plif.cli.main import main
from plif.experiments.report import report_rows, time_to_accuracy
from plif.experiments.runs import read_run

from .conftest import rows, write_run
from .helpers import assert_real_png


@pytest.fixture
def runs(tmp_path):
    r = tmp_path / "runs"
    write_run(r / "plif2", rows=rows([0.80, 0.91, 0.945, 0.944], taus=[[1.9, 2.1], [1.7, 2.6], [1.6, 3.1], [1.6, 3.3]],
                                     val_accs=[0.8, 0.93, 0.92, 0.93], epoch_time=12.5))
    write_run(r / "lif16", neuron="lif", tau0=16.0, rows=rows([0.40, 0.60, 0.70, 0.75]))
    write_run(r / "avg", pool="avg", epochs=10, rows=rows([0.85, 0.90]))
    write_run(r / "if", dataset="mnist", neuron="if", rows=rows([0.97]), summary=False)
    return r


def test_rows_put_each_run_beside_the_papers_number(runs):
    got = {row.label: row for row in report_rows([read_run(p) for p in sorted(runs.iterdir())])}
    p = got["plif2"]
    assert (p.acc_a, p.acc_a_epoch, p.paper_a) == (pytest.approx(94.5), 3, 94.38)
    assert p.diff_a == pytest.approx(0.12)
    assert (p.acc_b, p.acc_b_epoch, p.paper_b) == (pytest.approx(91.0), 2, 93.85)
    assert p.diff_b == pytest.approx(-2.85)
    assert p.source == "Table 3 / supplement" and p.protocol == "4 epochs (paper 1024)"
    assert (got["lif16"].paper_a, got["lif16"].source, got["lif16"].paper_b) == (94.47, "Table 4", None)
    assert got["lif16"].diff_a == pytest.approx(75.0 - 94.47)
    assert (got["avg"].paper_a, got["avg"].source, got["avg"].epochs) == (94.74, "Table 5", "2/10")
    assert got["if"].paper_a is None and got["if"].diff_a is None


def test_time_to_accuracy_counts_wall_time_of_every_epoch():
    m = rows([0.5, 0.85, 0.95], epoch_time=10.0)
    assert time_to_accuracy(m, 0.8) == (2, 20.0)
    assert time_to_accuracy(m, 0.95) == (3, 30.0)
    assert time_to_accuracy(m, 0.99) is None


def test_report_writes_markdown_json_and_figures(runs, tmp_path, capsys):
    (runs / "empty").mkdir()
    out = tmp_path / "report"
    assert main(["report", *map(str, sorted(runs.iterdir())), "--out", str(out), "--targets", "90,0.95"]) == 0
    md = (out / "report.md").read_text()
    assert "| plif2 | fashion-mnist | PLIF(tau0=2), max-pool | 4/4 | 94.50 (ep 3) | 94.38 | +0.12 |" in md
    assert "| 91.00 (ep 2) | 93.85 | -2.85 |" in md
    assert "| lif16 | fashion-mnist | LIF(tau=16), max-pool | 4/4 | 75.00 (ep 4) | 94.47 | -19.47 |" in md
    assert "| plif2 | 2, 25 s | not reached |" in md
    assert "| avg | 2, 20 s | not reached |" in md
    assert "unfinished: 2 of 10 epochs" in md and "empty: skipped" in md
    assert "note: empty: skipped" in capsys.readouterr().out
    data = json.loads((out / "report.json").read_text())
    assert [r["label"] for r in data["accuracy"]] == ["avg", "if", "lif16", "plif2"]
    assert data["time_to_accuracy"][3]["targets"]["0.9"] == {"epoch": 2, "wall_s": 25.0}
    for name in ("test_accuracy.png", "taus.png"):
        assert_real_png(out / name)
        assert f"]({name})" in md
    taus = json.loads((out / "taus.json").read_text())["series"]
    assert [s["run"] for s in taus] == ["plif2"]  # the only run with PLIF taus recorded
    plif = next(s for s in taus if s["run"] == "plif2")
    assert plif["epoch"] == [0, 1, 2, 3, 4] and plif["taus"][0] == [2.0, 2.0] and plif["taus"][-1] == [1.6, 3.3]
    acc = json.loads((out / "test_accuracy.json").read_text())["series"]
    assert {s["dataset"] for s in acc} == {"fashion-mnist", "mnist"}
    assert (out / "test_accuracy.csv").read_text().splitlines()[0] == "run,dataset,setting,epoch,test_acc_pct"


def test_a_run_with_another_surrogate_is_named_so_wherever_its_setting_is_shown(tmp_path):
    """A run trained with a custom surrogate was "PLIF(tau0=2), max-pool" like the paper's (issue 40): the
    table, the runs list, the figures' data and titles name its surrogate; the paper's number of the same
    neuron, tau and pooling stays beside it, the protocol column saying the surrogate differs."""
    r = tmp_path / "runs"
    write_run(r / "paper", rows=rows([0.9], taus=[[2.1]]), surrogate="atan")
    write_run(r / "super", rows=rows([0.9], taus=[[2.1]]), surrogate="my_surrogates:superspike")
    write_run(r / "old", rows=rows([0.9], taus=[[2.1]]))  # stored before the field: atan
    out = tmp_path / "report"
    assert main(["report", str(r / "paper"), str(r / "super"), str(r / "old"), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    named = "PLIF(tau0=2), max-pool, my_surrogates:superspike surrogate"
    assert f"| super | fashion-mnist | {named} | 1/4 | 90.00 (ep 1) | 94.38 |" in md
    assert "surrogate my_surrogates:superspike (paper atan)" in md and f"`{r / 'super'}` — {named}, network" in md
    for label in ("paper", "old"):
        assert f"| {label} | fashion-mnist | PLIF(tau0=2), max-pool | 1/4 |" in md
    assert md.count("(paper atan)") == 1
    series = json.loads((out / "test_accuracy.json").read_text())["series"]
    assert {s["run"]: s["setting"] for s in series}["super"] == named
    assert f'super,fashion-mnist,"{named}",1,90' in (out / "test_accuracy.csv").read_text()


def test_report_without_any_readable_run_is_an_error(tmp_path, capsys):
    (tmp_path / "nothing").mkdir()
    assert main(["report", str(tmp_path / "nothing"), "--out", str(tmp_path / "o")]) == 2
    assert "no run folder could be read" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "nothing"), "--out", str(tmp_path / "o"), "--targets", "x"]) == 2


def test_report_figures_in_the_requested_formats(runs, tmp_path):
    out = tmp_path / "report"
    assert main(["report", str(runs / "plif2"), "--out", str(out), "--format", "svg,pdf", "--dpi", "72"]) == 0
    assert sorted(p.name for p in out.iterdir() if p.suffix in (".png", ".svg", ".pdf")) == [
        "taus.pdf", "taus.svg", "test_accuracy.pdf", "test_accuracy.svg"]
    md = (out / "report.md").read_text()
    assert "](taus.svg)" in md and "](test_accuracy.svg)" in md
    assert main(["report", str(runs / "plif2"), "--out", str(tmp_path / "bad"), "--dpi", "1"]) == 2
    assert not (tmp_path / "bad").exists()


def test_a_failed_report_leaves_no_folder_or_file_it_made(runs, tmp_path, monkeypatch, capsys):
    """A report that failed half-way left its --out folder behind (issue 31)."""
    import errno

    from plif.experiments import report

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(a[0]))

    monkeypatch.setattr(report, "save_json", full)  # after the figures are written
    assert main(["report", str(runs / "plif2"), "--out", str(tmp_path / "new" / "report")]) == 2
    assert "No space left on device" in capsys.readouterr().err and not (tmp_path / "new").exists()
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "notes.txt").write_text("mine")
    assert main(["report", str(runs / "plif2"), "--out", str(tmp_path / "old")]) == 2
    assert [p.name for p in (tmp_path / "old").iterdir()] == ["notes.txt"]


def test_the_protocol_column_names_a_recipe_that_is_not_the_papers(tmp_path):
    """issue 56: --loss, --optimizer, --weight-decay, --warmup-epochs shown beside the run; a run recorded
    before they existed (or with the paper's recipe) shows none of them."""
    r = tmp_path / "runs"
    write_run(r / "sew", epochs=1024, rows=rows([0.9]), loss="ce", label_smoothing=0.1, optimizer="sgd", momentum=0.9,
              nesterov=True, weight_decay=5e-4, warmup_epochs=2)
    write_run(r / "tet", epochs=1024, rows=rows([0.9]), loss="tet", tet_lambda=0.05, tet_phi=1.0)
    write_run(r / "paper", epochs=1024, rows=rows([0.9]), loss="mse", optimizer="adam", momentum=0.5)
    write_run(r / "old", epochs=1024, rows=rows([0.9]))
    got = {row.label: row.protocol for row in report_rows([read_run(p) for p in sorted(r.iterdir())])}
    assert got["sew"] == ("loss ce (label smoothing 0.1; paper mse), SGD momentum 0.9, Nesterov (paper Adam), "
                          "weight decay 0.0005 (paper 0), 2 warm-up epochs (paper none)")
    assert got["tet"] == "loss tet (λ 0.05, φ 1; paper mse)"
    assert got["paper"] == got["old"] == ""
