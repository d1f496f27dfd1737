"""Loading a trained network back from a run folder (``config.json`` + ``checkpoints/<name>.pt``),
and the test split it was evaluated on."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from .checkpoint import check_finite, load_checkpoint
from .config import read_run_config
from .folder import CHECKPOINTS, RunFolder

__all__ = ["load_run", "run_test_split"]


def load_run(run_dir: str | Path, which: str = "best", map_location="cpu", backend: str = "auto",
             config: dict | None = None, trust_modules: Iterable[str] = ()):
    """Rebuild the network of a run and load its weights: ``(network in eval mode, config dict)``
    (:func:`plif.models.run_network.build_run_network`: its notation or its ``--model`` factory).

    - which: ``best`` (the validation-selected checkpoint of protocol B if the run has one, else the
      best-test one of protocol A), ``best_test``, ``best_val``, ``last``, or a path to a ``.pt`` file
      holding weights for this run's network.
    - backend: how the neurons run here; the backend the run was trained with is not used (a run
      trained with ``triton`` on a GPU loads on a CPU-only machine).
    - config: the run's config as :func:`plif.runs.read_run_config` gave it (a caller that read it
      already); read from the folder when None.
    - trust_modules: modules the run's config may name a surrogate or ``--model`` from
      (``MODULE:NAME``), and model files by their paths (``FILE.py``); one it names that is neither
      among them (or ``$PLIF_TRUST_MODULES``) nor imported already is refused, not imported: a run
      folder from someone else runs no code (:func:`plif.runs.stored_surrogate`,
      :func:`plif.runs.config.stored_model`).

    A folder that is not a run, a malformed ``config.json``, a corrupted checkpoint, one whose
    tensors do not match the network and one with non-finite weights raise errors naming the file.

    Example: a run folder holds ``config.json`` and ``checkpoints/``; here its two essential parts are
    written by hand (``plif train`` writes them, with every setting of the run):

    >>> import tempfile, torch
    >>> from plif import build_network
    >>> from plif.runs import RunFolder, load_run, save_checkpoint
    >>> folder = RunFolder(tempfile.mkdtemp())
    >>> config = {"network": "FC10-PLIF", "input_shape": [1, 28, 28], "T": 2}
    >>> folder.write_config(config)
    >>> trained = build_network(config["network"], (1, 28, 28), T=2)
    >>> _ = save_checkpoint(folder.checkpoint("best_test"), {"model": trained.state_dict(), "config": config})
    >>> net, config = load_run(folder.path)              # which="best": best_val where the run has one
    >>> x = torch.ones(1, 1, 28, 28)
    >>> net.training, config["network"], torch.equal(net(x), trained(x))
    (False, 'FC10-PLIF', True)
    """
    from ..models.run_network import build_run_network, network_label

    folder = RunFolder(run_dir)
    if config is None:
        config = read_run_config(folder, trust_modules=trust_modules)
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
    try:  # a --model run's factory: read_run_config checked it is trusted
        net = build_run_network(config, backend)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{folder.config}: {e}") from None
    try:
        net.load_state_dict(state["model"], strict=True)
    except RuntimeError as e:
        raise ValueError(f"{path}: checkpoint does not match {network_label(config, 'the network {!r}')} "
                         f"for input {tuple(config['input_shape'])}: {str(e).splitlines()[0]}") from None
    return net.eval(), config


def run_test_split(config: dict, data_dir=None, limit: int | None = None, device="cpu", source="the run's config"):
    """The test split of the run whose stored config is ``config``, as its training evaluated it:
    ``(Split, prepare)`` (:func:`plif.data.pipeline.load_test_split`; ``prepare(x, None)`` makes a
    batch network input), the one loader of ``plif eval``, ``plif stats`` and ``plif plot encoder``.

    - data_dir: the dataset's folder; None: the run's own ``data_dir`` (refused, naming ``source``,
      when that folder is gone), or the default folder where the run named none.
    - limit: at most this many samples, the class-stratified subset ``--max-test-samples`` takes;
      None: the run's own ``max_test_samples`` (all of them where it set none).
    """
    import os

    from ..catalog import get_dataset
    from ..data.pipeline import load_test_split
    from ..models.run_network import run_prepare

    if not config.get("dataset"):
        raise ValueError(f"{source}: the run config names no 'dataset', so it has no test split")
    if data_dir is None:
        data_dir = config.get("data_dir")
        if data_dir and not os.path.isdir(data_dir):  # never created: it is an input
            raise ValueError(f"{source}: data_dir {data_dir}: no such folder (moved?); pass --data-dir")
    try:
        spec = get_dataset(config["dataset"])
    except ValueError as e:
        raise ValueError(f"{source}: {e}") from None
    limit = config.get("max_test_samples") if limit is None else limit
    split, prepare = load_test_split(spec, data_dir, int(config["T"]), limit, device)
    return split, run_prepare(prepare, config, spec.is_event)
