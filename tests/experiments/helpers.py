import os
from pathlib import Path

import numpy as np


def shared_dir() -> Path:
    """``shared/`` beside the repo checkout, or the parent of ``$PLIF_SHARED_DATA``."""
    env = os.environ.get("PLIF_SHARED_DATA")
    if env:
        return Path(env).parent
    return Path(__file__).resolve().parents[2] / ".." / "shared"


def assert_real_png(path, min_side=200, min_std=0.02):
    """The file is a PNG of a sensible size whose pixels are not all one colour."""
    from matplotlib.image import imread

    path = Path(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    img = imread(path)
    assert img.shape[0] >= min_side and img.shape[1] >= min_side, img.shape
    assert float(np.std(img[..., :3])) > min_std, f"{path} is nearly uniform"
