import os
from pathlib import Path

from plif_testing import assert_real_png  # noqa: F401  (the experiments' tests import it from here)



def shared_dir() -> Path:
    """``shared/`` beside the repo checkout, or the parent of ``$PLIF_SHARED_DATA``."""
    env = os.environ.get("PLIF_SHARED_DATA")
    if env:
        return Path(env).parent
    return Path(__file__).resolve().parents[2] / ".." / "shared"
