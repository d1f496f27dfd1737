"""Loading a trained network back from a run folder (``config.json`` + ``checkpoints/<name>.pt``)."""
from __future__ import annotations

from pathlib import Path

from .checkpoint import check_finite, load_checkpoint
from .config import read_run_config
from .folder import CHECKPOINTS, RunFolder

__all__ = ["load_run"]


def load_run(run_dir: str | Path, which: str = "best", map_location="cpu", backend: str = "auto",
             config: dict | None = None):
    """Rebuild the network of a run and load its weights: ``(SpikingNetwork in eval mode, config dict)``.

    - which: ``best`` (the validation-selected checkpoint of protocol B if the run has one, else the
      best-test one of protocol A), ``best_test``, ``best_val``, ``last``, or a path to a ``.pt`` file
      holding weights for this run's network.
    - backend: how the neurons run here; the backend the run was trained with is not used (a run
      trained with ``triton`` on a GPU loads on a CPU-only machine).
    - config: the run's config as :func:`plif.runs.read_run_config` gave it (a caller that read it
      already); read from the folder when None.

    A folder that is not a run, a malformed ``config.json``, a corrupted checkpoint, one whose
    tensors do not match the network and one with non-finite weights raise errors naming the file.

    Example: a run trained for one epoch on 64 random images in Fashion-MNIST's format, loaded back:

    >>> import gzip, tempfile
    >>> import numpy as np
    >>> from pathlib import Path
    >>> folder = Path(tempfile.mkdtemp())
    >>> def write_idx(name, a):                          # Fashion-MNIST's file format, IDX in gzip
    ...     with gzip.open(folder / name, "wb") as f:
    ...         _ = f.write(bytes([0, 0, 8, a.ndim]) + np.array(a.shape, ">u4").tobytes() + a.tobytes())
    >>> rng = np.random.default_rng(0)
    >>> for split, n in (("train", 64), ("t10k", 32)):
    ...     write_idx(f"{split}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
    ...     write_idx(f"{split}-labels-idx1-ubyte.gz", np.arange(n, dtype=np.uint8) % 10)
    >>> from plif.runs import load_run
    >>> from plif.train import TrainConfig, train
    >>> cfg = TrainConfig(dataset="fashion-mnist", data_dir=str(folder), network="FC10-PLIF", T=2, epochs=1,
    ...                   batch_size=32, out=str(folder / "run"))
    >>> net, config = load_run(train(cfg, log=lambda line: None))
    >>> config["network"], net.training, net.T
    ('FC10-PLIF', False, 2)
    """
    from ..models import build_network

    folder = RunFolder(run_dir)
    if config is None:
        config = read_run_config(folder)
    if which == "best":
        which = "best_val" if folder.checkpoint("best_val").is_file() else "best_test"
    if str(which).endswith(".pt"):
        path = Path(which)
    elif which in CHECKPOINTS:
        path = folder.checkpoint(which)
    else:
        raise ValueError(f"unknown checkpoint {which!r}; valid: best, {', '.join(CHECKPOINTS)} or a .pt path")
    if not path.is_file() and not str(which).endswith(".pt"):
        raise FileNotFoundError(f"{run_dir}: no {path.name} under checkpoints/ (the run finished no epoch?)")
    state = load_checkpoint(path, map_location)
    check_finite(state, path)
    try:
        net = build_network(config["network"], config["input_shape"], config["T"],
                            **config.get("network_kwargs", {})).set_backend(backend)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{folder.config}: {e}") from None
    try:
        net.load_state_dict(state["model"], strict=True)
    except RuntimeError as e:
        raise ValueError(f"{path}: checkpoint does not match the network {config['network']!r} "
                         f"for input {tuple(config['input_shape'])}: {str(e).splitlines()[0]}") from None
    return net.eval(), config
