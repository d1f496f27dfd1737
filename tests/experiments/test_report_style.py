"""Report details a reader relies on: the protocol column names every difference; identical accuracy
curves stay distinguishable and LIF's dashes show in the legend; the neuron figures share one y-label."""
import pytest

from plif.experiments import neuron_curves, report
from plif.experiments.report import report_rows
from plif.experiments.runs import read_run

from .conftest import rows, write_run


@pytest.fixture
def figures(monkeypatch):
    """Every matplotlib figure made, kept to be read; they and their data are written as usual (to
    the test's tmp_path)."""
    from plif.experiments import figures as figures_mod

    got, made = [], figures_mod.new_figure

    def new_figure(*a, **k):
        fig, axes = made(*a, **k)
        got.append(fig)
        return fig, axes
    monkeypatch.setattr(figures_mod, "new_figure", new_figure)
    monkeypatch.setattr(report, "new_figure", new_figure)
    return got


def test_protocol_column_lists_batch_lr_t_max_and_validation_cap(tmp_path):
    write_run(tmp_path / "r", rows=rows([0.9]), batch_size=64, lr=2e-3, t_max=2, val_split=0.15, max_val_samples=2000)
    (row,) = report_rows([read_run(tmp_path / "r")])
    assert row.protocol == ("2000 validation samples (paper: all of its 15%), 4 epochs (paper 1024), "
                            "batch 64 (paper 16), lr 0.002 (paper 0.001), T_max 2 (paper 64)")
    write_run(tmp_path / "p", rows=rows([0.9]), epochs=1024, batch_size=16, lr=1e-3, t_max=64, val_split=0.15)
    assert report_rows([read_run(tmp_path / "p")])[0].protocol == ""


def test_identical_curves_stay_visible_and_lif_dashes_reach_the_legend(tmp_path, figures):
    same = rows([0.8, 0.85, 0.9])
    runs = [read_run(write_run(tmp_path / n, neuron=neuron, rows=same), n)
            for n, neuron in (("a-lif", "lif"), ("b-plif", "plif"), ("c-plif", "plif"))]
    report._accuracy_figure(runs, tmp_path / "acc.png", report.FigureOutput(dpi=30))  # small: quick to write
    (ax,) = figures[0].axes
    lines = [ln for ln in ax.get_lines() if ln.get_label() in ("a-lif", "b-plif", "c-plif")]
    widths = [ln.get_linewidth() for ln in lines]
    assert widths == sorted(widths, reverse=True) and widths[0] > widths[-1] + 1  # later ones drawn thinner on top
    assert len({ln.get_marker() for ln in lines}) == 3 and len({ln.get_markersize() for ln in lines}) == 3
    assert [ln.get_zorder() for ln in lines] == sorted(ln.get_zorder() for ln in lines)
    legend = ax.get_legend()
    handle = legend.legend_handles[0]
    assert handle.get_linestyle() == "--" and legend.handlelength >= 4  # room for several dashes
    on, off = handle._dash_pattern[1]
    assert on + off <= legend.handlelength * 7 / 2  # at least two dash periods in the handle (font size 7)


def test_neuron_figures_share_one_y_label(tmp_path, figures):
    neuron_curves.plot_neuron_figures(tmp_path, steps=100, output=report.FigureOutput(dpi=30))
    labels = {fig.axes[0].get_ylabel() for fig in figures}
    assert labels == {neuron_curves.YLABEL} and "units of the input" in neuron_curves.YLABEL
