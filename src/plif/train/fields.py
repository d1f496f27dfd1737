"""A config field's kind and its command-line flag, read from :class:`plif.train.TrainConfig`'s annotations.

``plif train`` and ``plif ablate`` generate their flags from these (:mod:`plif.cli.config_flags`), a
stored config is type-checked with them (:meth:`TrainConfig.from_dict`), and every error about a
value names its flag (:func:`flag_name`).
"""
from __future__ import annotations

import dataclasses

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


def is_int(v) -> bool:
    """An integer that is not a bool (JSON's ``true`` is no number of epochs)."""
    return isinstance(v, int) and not isinstance(v, bool)


def value_fits(value, kind, optional: bool) -> bool:
    """Whether ``value`` is of a field's kind (an int passes for a float; ``None`` only when optional)."""
    if value is None:
        return optional
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return is_int(value)
    if kind is float:
        return is_int(value) or isinstance(value, float)
    return isinstance(value, kind)
