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
    from plif_testing import assert_real_png, red_and_blue_pixels

    f = np.zeros((12, 2, 8, 8))
    f[:, 1, :4] = 1  # ON (channel 1) in the top half of every frame, OFF in the bottom half
    f[:, 0, 4:] = 1
    img = assert_real_png(save_frames_grid(f, tmp_path / "g.png", title="x"))
    red, blue = red_and_blue_pixels(img)
    assert red > 100 and blue > 100 and abs(red - blue) < 0.2 * red  # both halves drawn, equally large
    only_on = f.copy()
    only_on[:, 0] = 0
    assert red_and_blue_pixels(assert_real_png(save_frames_grid(only_on, tmp_path / "on.png")))[1] == 0
