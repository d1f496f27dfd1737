"""``plif train --model REF``: a network written as ``nn.Module`` code (:mod:`plif.models.factories`)
trained with everything ``plif train`` does for a network in the paper's notation.

The factory is called with the seed set, as ``build_network`` is; the module is checked on one batch
of the dataset's input (``[T, B, ...]``: a static image repeated over T as a stride-0 view, which
:func:`plif.fuse` hoists) before the run folder is touched, then fused per ``--memory``
(:func:`plif.fuse`) and its neurons set to ``--backend``.  What needs a network in the paper's
notation (NIR export, ``net.step``, BN folding, SOP counts) is refused for such a run in one line
(:func:`plif.runs.refuse_model_run`).
"""
from __future__ import annotations

import torch

__all__ = ["NOTATION_ONLY", "check_user_model", "setup_user_model", "sample_input"]

NOTATION_ONLY = ("network", "neuron", "tau0", "pool", "per_channel_tau", "authors_code", "bn_per_step", "surrogate",
                 "detach_reset", "checkpoint_blocks")
"""The settings that build or shape a network from its notation: a ``--model`` network is its own."""


def sample_input(cfg, batch: int = 2, device="cpu") -> torch.Tensor:
    """A batch of the dataset's input as a ``--model`` network gets it: ``[T, batch, *input_shape]``
    (zeros: only its shape matters)."""
    x = torch.zeros((batch, *cfg.input_shape), device=device)
    return x.unsqueeze(0).expand(cfg.T, *x.shape)


def _build(cfg) -> torch.nn.Module:
    from ..models.factories import build_model

    torch.manual_seed(cfg.seed)
    return build_model(cfg.model, cfg.input_shape, cfg.num_classes, cfg.T, cfg.backend, option="--backend")


def check_user_model(cfg) -> None:
    """Refuse, before anything is written, a ``--model`` that does not import, names no attribute,
    raises, returns no module, or whose output for the dataset's input is not ``[T, B, classes]``
    (:class:`plif.models.factories.ModelError`, one line naming the reference); and one whose weights
    with Adam's state exceed the machine's or device's memory."""
    from ..models.factories import check_model_output
    from .checks import check_weights_fit

    model = _build(cfg)
    check_model_output(model, cfg.model, sample_input(cfg), cfg.num_classes)
    check_weights_fit(model, f"--model {cfg.model}", cfg.device)


def setup_user_model(cfg, device: torch.device) -> torch.nn.Module:
    """The ``--model`` network, seeded, fused per ``--memory``, its neurons on ``--backend``, on ``device``."""
    model = _build(cfg)
    if cfg.memory_options().any():
        from ..models.memory import DEFAULT_MEMORY

        try:
            from ..models.fuse import fuse
        except ImportError:  # TEMPORARY until the fuse branch is merged: composed layers
            fuse = None
        if fuse is not None:
            model = fuse(model, memory=cfg.memory or DEFAULT_MEMORY)
    return model.to(device)
