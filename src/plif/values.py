"""A setting's value against its kind, with the one message ``plif train`` and the Python API give.

``plif train --detach-reset`` and ``build_network(..., detach_reset=...)`` refuse the same values
with the same words, the first naming the flag (``--detach-reset``), the second the keyword.
"""
from __future__ import annotations

import math

__all__ = ["is_int", "value_fits", "check_value"]


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


def check_value(name: str, value, kind: type, optional: bool = False):
    """``value`` when it is of ``kind`` (``None`` too where ``optional``) and, for a float, finite;
    else ``ValueError`` naming ``name``: ``detach_reset must be bool, got 'False'``, ``v_threshold
    must be a finite number, got nan``."""
    if not value_fits(value, kind, optional):
        raise ValueError(f"{name} must be {kind.__name__}, got {value!r}")
    if kind is float and value is not None and not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    return value
