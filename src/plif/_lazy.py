"""Names a package imports on first use (PEP 562), so torch-free parts stay light."""
from __future__ import annotations

import importlib


def lazy_names(package: str, where: dict[str, str], own: dict):
    """``(__getattr__, __dir__)`` for ``package`` resolving each name of ``where`` in its submodule."""

    def __getattr__(name: str):
        if name in where:
            return getattr(importlib.import_module(where[name], package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(own) | set(where))

    return __getattr__, __dir__
