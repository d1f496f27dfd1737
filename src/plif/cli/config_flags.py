"""Command-line flags generated from :class:`plif.train.TrainConfig`'s fields.

Help, choices and defaults are declared once, next to each field (``field(metadata={"help": ...,
"choices": (...)})``); ``plif train`` and ``plif ablate`` both take their flags from here, so a
field added to the config gets a flag in both without touching the CLI.  Every flag defaults to
``None`` ("not given") so that the preset and, on ``--resume``, the stored run fill the rest.
"""
from __future__ import annotations

import argparse
import dataclasses
import re

from ..train.fields import flag_name

__all__ = ["add_config_flags", "given_settings", "flag_name"]

# what argparse takes for a value although it starts with "-": its own pattern knows only plain
# negative numbers, so "--time-limit -1h" or "--lr -inf" died on "expected one argument" instead
# of reaching the option's own one-line refusal
_NEGATIVE_VALUE = re.compile(r"^-(\d|\.\d|inf|nan)", re.IGNORECASE)


def _help(f: dataclasses.Field, kind) -> str:
    text = f.metadata.get("help", "")
    if f.default is not None and f.default is not dataclasses.MISSING and "[" not in text:
        shown = ("yes" if f.default else "no") if kind is bool else f.default
        text = f"{text} [{shown}]".strip()
    return text.replace("%", "%%")


def _number(kind):
    """An argparse ``type`` for an int or float flag written in ASCII (Python's ``int('١٢')`` is 12)."""
    def parse(text: str):
        try:
            if not text.isascii():
                raise ValueError(text)
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be {'an integer' if kind is int else 'a number'} in ASCII digits, got {text!r}") from None

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def add_config_flags(parser: argparse.ArgumentParser, exclude=(), cls=None) -> list[str]:
    """Add one flag per field of ``cls`` (default TrainConfig) not in ``exclude``; returns the field names.

    bool fields get ``--x`` / ``--no-x``; int, float and str fields take a value (with the ``choices``
    and ``metavar`` the metadata names); ``T | None`` fields are the same with "not given" meaning the preset.
    Fields marked ``metadata={"derived": True}`` are computed, not set, and get no flag.
    """
    from ..train.config import TrainConfig
    from ..train.fields import field_kind

    cls = cls or TrainConfig
    parser._negative_number_matcher = _NEGATIVE_VALUE  # argparse's hook for negative-looking values
    group = parser.add_argument_group("run settings (from the training config)")
    names = []
    for f in dataclasses.fields(cls):
        if f.metadata.get("derived") or f.name in exclude:
            continue
        kind, _ = field_kind(f)
        help_text = _help(f, kind)
        if kind is bool:
            group.add_argument(flag_name(f.name), dest=f.name, action=argparse.BooleanOptionalAction,
                               default=None, help=help_text)
        else:
            choices = f.metadata.get("choices")
            group.add_argument(flag_name(f.name), dest=f.name, type=_number(kind) if kind in (int, float) else kind,
                               default=None,
                               choices=tuple(choices) if choices else None,
                               metavar=f.metadata.get("metavar") or (None if choices else kind.__name__.upper()),
                               help=help_text)
        names.append(f.name)
    return names


def given_settings(args, cls=None, exclude=()) -> dict:
    """The config fields the user gave on the command line (flags left out stay ``None``)."""
    from ..train.config import TrainConfig

    cls = cls or TrainConfig
    names = {f.name for f in dataclasses.fields(cls)} - set(exclude)
    return {k: v for k, v in vars(args).items() if k in names and v is not None}
