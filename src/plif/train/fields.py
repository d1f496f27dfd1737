"""A config field's kind and its command-line flag, read from :class:`plif.train.TrainConfig`'s annotations.

``plif train`` and ``plif ablate`` generate their flags from these (:mod:`plif.cli.config_flags`), a
stored config is type-checked with them (:meth:`TrainConfig.from_dict`), and every error about a
value names its flag (:func:`flag_name`).
"""
from __future__ import annotations

import dataclasses

from ..values import is_int, value_fits  # noqa: F401  (the config's kinds, re-exported)

__all__ = ["field_kind", "flag_name", "is_int", "value_fits"]

_KINDS = {"bool": bool, "int": int, "float": float, "str": str, "tuple": tuple}


def field_kind(f: dataclasses.Field) -> tuple[type, bool]:
    """``(base type, optional)`` of a config field from its annotation (``int | None`` -> ``(int, True)``)."""
    text = f.type.__name__ if isinstance(f.type, type) else str(f.type).replace("typing.", "")
    parts = [p.strip() for p in text.replace("Optional[", "").rstrip("]").split("|")]
    optional = "None" in parts
    names = [p for p in parts if p != "None"]
    if len(names) != 1 or names[0] not in _KINDS:
        raise TypeError(f"TrainConfig.{f.name}: unsupported annotation {f.type!r} (use bool, int, float, str, "
                        "optionally '| None')")
    return _KINDS[names[0]], optional


def flag_name(name: str) -> str:
    """The command-line flag of a config field: ``max_train_samples`` -> ``--max-train-samples``."""
    return "--" + name.replace("_", "-")
