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
