"""Whether SpikingJelly (an optional comparison point, never a dependency) can be used here, and why not.

``find_spec`` is not enough: SpikingJelly 2.0 installed with ``--no-deps`` finds its package but fails
on ``import loguru``.  The benchmarks import the modules they use and keep the error, so a table says
"unavailable: ModuleNotFoundError: No module named 'loguru'" instead of silently dropping the row.
"""
from __future__ import annotations

import importlib

__all__ = ["spikingjelly_unavailable", "INSTALL_HINT"]

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
