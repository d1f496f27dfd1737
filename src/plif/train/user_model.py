"""``plif train --model REF``: a network written as ``nn.Module`` code (:mod:`plif.models.factories`)
trained with everything ``plif train`` does for a network in the paper's notation.

The factory is called with the seed set, as ``build_network`` is (a reseed inside it derived from
``--seed``, :func:`plif.models.factories.build_model`), before any kernel is built; the module is
checked on one batch of the dataset's input (``[T, B, ...]``: a static image repeated over T as a stride-0 view, which
:func:`plif.fuse` hoists) before the run folder is touched; then built, fused per ``--memory`` and its
neurons set to ``--backend`` as a notation network is (:func:`plif.train.session.setup_model`).  What needs a network in the paper's
notation (the encoder plot) is refused for such a run in one line (:func:`plif.runs.refuse_model_run`);
NIR export, stepping, BN folding and statistics take any module plif can trace.
"""
from __future__ import annotations

import torch

__all__ = ["check_run_network", "check_user_model", "sample_input"]


def sample_input(cfg, batch: int = 2, device="cpu") -> torch.Tensor:
    """A batch of the dataset's input as a ``--model`` network gets it: ``[T, batch, *input_shape]``
    (zeros: only its shape matters)."""
    from ..models.inputs import repeat_over_time

    return repeat_over_time(torch.zeros((batch, *cfg.input_shape), device=device), cfg.T)


def check_run_network(cfg, asked=True) -> None:
    """The network of ``cfg`` checked before anything is written: a ``--model`` network by
    :func:`check_user_model`, a notation network by :func:`plif.train.checks.check_network`."""
    from .checks import check_network

    if cfg.model is not None:
        check_user_model(cfg)
    else:
        check_network(cfg, asked=asked)


def check_user_model(cfg) -> None:
    """Refuse, before anything is written, a ``--model`` that does not import, names no attribute,
    raises, returns no module, or whose output for the dataset's input is not ``[T, B, classes]``
    (:class:`plif.models.factories.ModelError`, one line naming the reference); and one whose weights
    with Adam's state exceed the machine's or device's memory."""
    from ..models.factories import check_model_output
    from ..models.run_network import build_run_network
    from .checks import check_weights_fit

    # seeded as plif train builds it (plif.train.session.setup_model), so a factory that reseeds torch
    # cannot make --seed 1 and --seed 2 one network
    model = build_run_network(cfg.to_dict(), cfg.backend, seed=cfg.seed, option="--backend")
    check_model_output(model, cfg.model, sample_input(cfg), cfg.num_classes)
    check_weights_fit(model, f"--model {cfg.model}", cfg.device)
