import json
import math

import pytest

from plif.experiments.figures import moving_average, new_figure, save_csv, save_json, save_png

from .helpers import assert_real_png


def test_moving_average_is_trailing_and_short_at_the_start():
    assert moving_average([1.0, 2.0, 3.0, 4.0], 2) == [1.0, 1.5, 2.5, 3.5]
    assert moving_average([2.0, 4.0], 64) == [2.0, 3.0]
    assert moving_average([], 3) == []


def test_writers_leave_complete_files_only(tmp_path):
    fig, ax = new_figure(4, 3)
    ax[0, 0].plot([0, 1, 2], [0, 1, 0])
    ax[0, 0].set_xlabel("t (ms)")
    save_png(fig, tmp_path / "a" / "f.png")
    assert_real_png(tmp_path / "a" / "f.png")
    save_json(tmp_path / "d.json", {"x": [1.0, math.nan, math.inf]})
    assert json.loads((tmp_path / "d.json").read_text()) == {"x": [1.0, None, None]}
    save_csv(tmp_path / "d.csv", ["a", "b"], [(1, 0.1), (2, None)])
    assert (tmp_path / "d.csv").read_text() == "a,b\n1,0.1\n2,\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "d.csv", "d.json"]  # no temporary files left


def test_a_blank_figure_fails_the_png_check(tmp_path):
    fig, ax = new_figure(4, 3)
    ax[0, 0].axis("off")
    save_png(fig, tmp_path / "blank.png")
    with pytest.raises(AssertionError, match="nearly uniform"):
        assert_real_png(tmp_path / "blank.png")


def test_figure_output_parses_the_command_line_and_names_the_bad_option():
    from plif.experiments.figures import FigureOutput

    assert FigureOutput.parse("png, PDF,svg,png") == FigureOutput(("png", "pdf", "svg"), 300)
    assert FigureOutput.parse("svg", 150).dpi == 150
    with pytest.raises(ValueError, match=r"--format: unknown figure format 'jpg' \(choose from png, pdf, svg\)"):
        FigureOutput.parse("png,jpg")
    with pytest.raises(ValueError, match="--format: give at least one"):
        FigureOutput.parse(" , ")
    for dpi in (0, 5000, True, 72.5):
        with pytest.raises(ValueError, match="--dpi"):
            FigureOutput(("png",), dpi)


def test_save_figure_writes_every_format_at_the_dpi_reproducibly(tmp_path):
    from plif.experiments.figures import FigureOutput, save_figure

    def figure():
        fig, ax = new_figure(4, 3)
        ax[0, 0].plot([0, 1, 2], [0, 1, 0])
        ax[0, 0].set_xlabel(r"membrane time constant $\tau$ (ms)")
        return fig

    paths = save_figure(figure(), tmp_path / "f.png", FigureOutput(("png", "pdf", "svg")))
    assert [p.name for p in paths] == ["f.png", "f.pdf", "f.svg"]
    assert_real_png(paths[0])
    from matplotlib.image import imread

    assert imread(paths[0]).shape[:2] == (3 * 300, 4 * 300)  # 300 dpi by default
    assert paths[1].read_bytes().startswith(b"%PDF")
    assert b"<svg" in paths[2].read_bytes()
    again = save_figure(figure(), tmp_path / "g", FigureOutput(("png", "pdf", "svg")))[1:]
    assert again[0].read_bytes() == paths[1].read_bytes() and again[1].read_bytes() == paths[2].read_bytes()


def test_binary_colormap_has_exactly_two_colours():
    from matplotlib.colors import to_rgba

    from plif.experiments.figures import binary_colormap

    cmap, norm = binary_colormap()
    assert cmap.N == 2
    assert cmap(norm(0)) == to_rgba("white") and cmap(norm(1)) == to_rgba("black")
