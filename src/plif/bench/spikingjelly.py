"""Whether SpikingJelly (an optional comparison point, never a dependency) can be used here, why not,
and which of its neuron implementations runs.

``find_spec`` is not enough: SpikingJelly 2.0 installed with ``--no-deps`` finds its package but fails
on ``import loguru``.  The benchmarks import the modules they use and keep the error, so a table says
"unavailable: ModuleNotFoundError: No module named 'loguru'" instead of silently dropping the row.
"""
from __future__ import annotations

import importlib

__all__ = ["spikingjelly_unavailable", "spikingjelly_path", "spikingjelly_model", "INSTALL_HINT"]

INSTALL_HINT = "pip install spikingjelly==2.0.0 --no-deps && pip install loguru"
_MODULES = ("spikingjelly.activation_based.neuron", "spikingjelly.activation_based.surrogate",
            "spikingjelly.activation_based.layer", "spikingjelly.activation_based.functional")


def spikingjelly_unavailable() -> str | None:
    """``None`` when every SpikingJelly module the benchmarks use imports, else a one-line reason."""
    for name in _MODULES:
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001  (a broken optional install raises more than ImportError)
            if isinstance(e, ModuleNotFoundError) and (e.name or "").split(".")[0] == "spikingjelly":
                return "not installed"
            return f"{type(e).__name__}: {e}"
    return None


def spikingjelly_path(device, neuron: str = "plif") -> str:
    """The neuron implementation SpikingJelly 2.0 binds on ``device``, for the bench tables.

    SpikingJelly 2.0 has no backend argument: per its documentation each call is dispatched from the
    input's device, CUDA eager preferring its native CUDA extension (built only from source with
    ``SJ_BUILD_NATIVE_CUDA=1``), then Triton, then its torch reference; the CPU always runs the torch
    reference.  ``SJ_PLIF_CUDA_IMPLEMENTATION`` (and ``SJ_LIF_...``) can force one.  This asks its own
    ``functional.neuron_implementation``; e.g. ``"triton (automatic; not available: cuda)"``."""
    import torch

    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        return "unknown: needs CUDA to ask"
    try:
        from spikingjelly.activation_based.functional import neuron_implementation

        found = neuron_implementation(neuron, dev)
    except Exception as e:  # noqa: BLE001  (a comparison point: say why, never stop the benchmark)
        return f"unknown: {type(e).__name__}: {e}"
    skipped = sorted(found.get("unavailable") or {})
    return f"{found['implementation']} (automatic" + (f"; not available: {', '.join(skipped)})" if skipped else ")")


def spikingjelly_model(name: str):
    """SpikingJelly 2.0's model-zoo module ``spikingjelly.activation_based.model.<name>`` (``sew_resnet``,
    ``spiking_resnet``, ``spiking_vgg``, ``parametric_lif_net``, ...).

    Those modules import torchvision only for ``load_state_dict_from_url`` (pretrained weights); where
    torchvision is missing (it does not install beside plif's pinned torch) a one-function stand-in is
    put into ``sys.modules`` first: ``torch.hub.load_state_dict_from_url``, the function torchvision
    re-exports.  A torchvision that imports is left alone."""
    import sys
    import types

    try:
        importlib.import_module("torchvision.models.utils")
    except Exception:  # noqa: BLE001  (absent, or present and broken: the stand-in serves either way)
        import torch.hub

        for module in ("torchvision", "torchvision.models", "torchvision.models.utils"):
            sys.modules.setdefault(module, types.ModuleType(module))
        sys.modules["torchvision.models.utils"].load_state_dict_from_url = torch.hub.load_state_dict_from_url
    return importlib.import_module(f"spikingjelly.activation_based.model.{name}")
