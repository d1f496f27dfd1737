import numpy as np
import pytest

from plif.data.preview import frames_to_rgb, save_frames_grid


def test_colours_and_scale():
    f = np.zeros((2, 2, 3, 4))
    f[0, 1, 0, 0] = 5  # ON -> red
    f[1, 0, 2, 3] = 5  # OFF -> blue
    rgb = frames_to_rgb(f)
    assert rgb.shape == (2, 3, 4, 3)
    assert tuple(rgb[0, 0, 0]) == (1.0, 0.0, 0.0) and tuple(rgb[1, 2, 3]) == (0.0, 0.0, 1.0)
    assert rgb.sum() == 2.0
    assert frames_to_rgb(np.zeros((1, 2, 2, 2))).sum() == 0  # empty frames stay black, no division by 0
    with pytest.raises(ValueError, match=r"\[T, 2, H, W\]"):
        frames_to_rgb(np.zeros((2, 3, 4)))


def test_png(tmp_path):
    p = save_frames_grid(np.random.default_rng(0).poisson(1.0, (12, 2, 8, 8)), tmp_path / "g.png", title="x")
    assert p.read_bytes()[:4] == b"\x89PNG"
