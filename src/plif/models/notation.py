"""The paper's network notation, parsed verbatim.

Grammar (``-`` separates items, spaces are ignored)::

    network := item ('-' item)*
    item    := '{' network '}' '*' COUNT  |  TOKEN

Tokens (a registry: :data:`TOKENS`):

    c128k3s1      Conv2d, 128 out channels, kernel 3, stride 1, padding k//2 (``p0`` etc. overrides)
    BN            BatchNorm
    PLIF LIF IF   spiking neuron layer
    MPk2s2 APk2s2 max / average pooling (APk10s10 on features = the voting layer)
    DP DP0.3      time-invariant dropout (p = 0.5 unless given; DP0 keeps every unit)
    FC2048        Linear, 2048 out features

Numbers are ASCII digits, each at most :data:`MAX_INT` (2^31-1, what every size in torch
holds; a longer one is refused by its digits, before Python's own limit on converting them).  To keep a typo from allocating the machine away, a repeat count is at most
:data:`MAX_REPEAT`, the expanded network at most :data:`MAX_LAYERS` tokens and braces nest at
most :data:`MAX_DEPTH` deep; each limit's error points at the token that crosses it.

The result is a flat list of :class:`Token` in order, each remembering where it was written, so
that errors later (shape inference) can point at the token too.  Every way a string can fail to
parse (a non-string included) raises :class:`NotationError`; a long string or token is shown as an
excerpt around the place.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..neurons import NEURONS

__all__ = ["Token", "NotationError", "parse", "TOKENS", "MAX_REPEAT", "MAX_LAYERS", "MAX_DEPTH", "MAX_INT"]

MAX_INT = 2**31 - 1
MAX_REPEAT = 1000
MAX_LAYERS = 10_000
MAX_DEPTH = 32


class NotationError(ValueError):
    """A malformed network string; the message quotes it and marks the offending place."""

    def __init__(self, text: str, pos: int, length: int, message: str):
        self.text, self.pos, self.message = text, pos, message
        shown, caret = _excerpt(text, pos, max(1, length))
        super().__init__(f"{message} at position {pos}:\n  {shown}\n  {caret}")


_SHOWN = 100  # characters of the string shown around an error (a 100,000-digit number stays readable)


def _printable(text: str) -> str:
    """``text`` with what a terminal cannot print (control characters, lone surrogates) escaped."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def _excerpt(text: str, pos: int, length: int) -> tuple[str, str]:
    """The string (or a window of it around ``pos``) and the caret line under ``[pos, pos+length)``."""
    start, end, before, after = 0, len(text), "", ""
    if len(text) > _SHOWN:
        start = max(0, pos - _SHOWN // 4)
        end = min(len(text), max(pos + min(length, _SHOWN // 2), start + _SHOWN))
        before, after = ("..." if start else ""), ("..." if end < len(text) else "")
    stop = min(pos + length, end)
    head, marked = before + _printable(text[start:pos]), _printable(text[pos:stop])
    return head + marked + _printable(text[stop:end]) + after, " " * len(head) + "^" * max(1, len(marked))


def _quote(word: str, limit: int = 40) -> str:
    """``repr(word)``, cut to its first characters and its length when it is long."""
    return repr(word) if len(word) <= limit else f"{word[:limit // 2]!r}... ({len(word):,} characters)"


def _digits(number: str) -> str:
    """A number as written, cut to its first digits and its length when it is long."""
    return number if len(number) <= 20 else f"{number[:10]}... ({len(number):,} digits)"


@dataclass(frozen=True)
class Token:
    """One layer token: ``kind`` (``conv``, ``bn``, ``neuron``, ``pool``, ``dropout``, ``fc``),
    its arguments, the text as written and its position in the string."""

    kind: str
    text: str
    pos: int
    args: dict = field(default_factory=dict, compare=False, hash=False)


_MAX_DIGITS = len(str(MAX_INT))


def _int(digits: str) -> int:
    """ASCII digits as an int, or ``MAX_INT + 1`` when they have more digits than any allowed
    number (so the caller's "more than MAX_INT" check names the token, instead of Python refusing
    to convert more than 4300 digits)."""
    digits = digits.lstrip("0") or "0"
    return MAX_INT + 1 if len(digits) > _MAX_DIGITS else int(digits)


def _ints(m, names):
    return {n: _int(m.group(n)) for n in names if m.group(n) is not None}


# name -> (regex, kind, argument builder); tried in order, the whole token must match.
TOKENS: dict[str, tuple[re.Pattern, str, callable]] = {
    "conv": (re.compile(r"c(?P<out>[0-9]+)k(?P<k>[0-9]+)s(?P<s>[0-9]+)(?:p(?P<p>[0-9]+))?"), "conv",
             lambda m: _ints(m, ("out", "k", "s", "p"))),
    "bn": (re.compile(r"BN"), "bn", lambda m: {}),
    "neuron": (re.compile(f"(?P<name>{'|'.join(NEURONS)})"), "neuron", lambda m: {"name": m.group("name")}),
    "pool": (re.compile(r"(?P<op>MP|AP)k(?P<k>[0-9]+)s(?P<s>[0-9]+)"), "pool",
             lambda m: {"op": m.group("op"), **_ints(m, ("k", "s"))}),
    "dropout": (re.compile(r"DP(?P<p>[0-9]*\.?[0-9]+)?"), "dropout",
                lambda m: {"p": float(m.group("p")) if m.group("p") else 0.5}),
    "fc": (re.compile(r"FC(?P<out>[0-9]+)"), "fc", lambda m: _ints(m, ("out",))),
}

# Hints for near misses, so "c128k3" says what is missing instead of only "unknown".
_HINTS = [
    (re.compile(r"c[0-9]*(k[0-9]*)?(s[0-9]*)?"), "a convolution needs all of c<out>k<kernel>s<stride>, e.g. c128k3s1"),
    (re.compile(r"(MP|AP)(k[0-9]*)?(s[0-9]*)?"), "pooling needs k<kernel>s<stride>, e.g. MPk2s2"),
    (re.compile(r"FC"), "a fully connected layer needs its width, e.g. FC2048"),
]


def _token(text: str, word: str, pos: int) -> Token:
    if not word.isascii():
        bad = next(i for i, ch in enumerate(word) if not ch.isascii())
        raise NotationError(text, pos + bad, 1, f"{_quote(word)}: {word[bad]!r} is not ASCII (write numbers with digits 0-9)")
    for kind, (pattern, _, build) in TOKENS.items():
        m = pattern.fullmatch(word)
        if m:
            args = build(m)
            for name, value in args.items():
                if isinstance(value, int) and value <= 0 and not (name == "p" and kind == "conv"):  # p0 is valid
                    raise NotationError(text, pos, len(word), f"{name}={value} in {_quote(word)} must be positive")
                if isinstance(value, int) and value > MAX_INT:
                    raise NotationError(text, pos, len(word), f"{name}={_digits(m.group(name))} in {_quote(word)} is more than "
                                                              f"{MAX_INT} (2^31-1)")
            if kind == "dropout" and not 0.0 <= args["p"] < 1.0:
                raise NotationError(text, pos, len(word), f"dropout probability {args['p']:g} in "
                                                          f"{_quote(word)} must be in [0, 1)")
            return Token(kind, word, pos, args)
    for pattern, hint in _HINTS:
        if pattern.fullmatch(word):
            raise NotationError(text, pos, len(word), f"incomplete token {_quote(word)}: {hint}")
    valid = f"c<out>k<k>s<s>, BN, {', '.join(NEURONS)}, MPk<k>s<s>, APk<k>s<s>, DP, FC<n>, {{...}}*n"
    raise NotationError(text, pos, len(word), f"unknown token {_quote(word)} (valid: {valid})")


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.i = 0

    def _skip_space(self):
        while self.i < len(self.text) and self.text[self.i].isspace():
            self.i += 1

    def _peek(self) -> str:
        self._skip_space()
        return self.text[self.i] if self.i < len(self.text) else ""

    def _error(self, message, pos=None, length=1):
        raise NotationError(self.text, self.i if pos is None else pos, length, message)

    def network(self, depth: int) -> list[Token]:
        tokens = self.item(depth)
        while self._peek() == "-":
            self.i += 1
            start = self.i
            tokens += self.item(depth)
            if len(tokens) > MAX_LAYERS:
                self._error(f"the network has more than {MAX_LAYERS} layers", start)
        return tokens

    def item(self, depth: int) -> list[Token]:
        c = self._peek()
        if c == "{":
            start = self.i
            if depth + 1 > MAX_DEPTH:
                self._error(f"braces nested more than {MAX_DEPTH} deep", start)
            self.i += 1
            inner = self.network(depth + 1)
            if self._peek() != "}":
                self._error("unbalanced braces: this '{' is never closed", start)
            self.i += 1
            if self._peek() != "*":
                self._error("a group '{...}' must be followed by '*<count>'")
            self.i += 1
            self._skip_space()
            m = re.compile(r"[0-9]+").match(self.text, self.i)
            if not m:
                bad = re.compile(r"[^-{}\s]*").match(self.text, self.i).group(0)
                self._error(f"bad repeat count {_quote(bad)}: expected a positive integer after '*'", length=len(bad))
            count = _int(m.group(0))
            if count < 1:
                self._error(f"bad repeat count {count}: must be at least 1", length=len(m.group(0)))
            if count > MAX_REPEAT:
                self._error(f"repeat count {_digits(m.group(0))} is more than {MAX_REPEAT}", length=len(m.group(0)))
            if len(inner) * count > MAX_LAYERS:
                self._error(f"this repeat makes {len(inner) * count} layers, more than {MAX_LAYERS}",
                            length=len(m.group(0)))
            self.i = m.end()
            return inner * count
        if c in ("", "-", "}", "*"):
            what = "end of string" if c == "" else repr(c)
            if c == "}" and depth == 0:
                self._error("unbalanced braces: '}' without a matching '{'")
            self._error(f"expected a layer token or '{{', found {what}")
        start = self.i
        m = re.compile(r"[^-{}*\s]+").match(self.text, self.i)
        self.i = m.end()
        return [_token(self.text, m.group(0), start)]

    def parse(self) -> list[Token]:
        if not self.text.strip():
            raise NotationError(self.text, 0, 1, "empty network string")
        tokens = self.network(0)
        if self._peek():
            c = self._peek()
            if c == "}":
                self._error("unbalanced braces: '}' without a matching '{'")
            self._error(f"unexpected {c!r} after a complete item (items are separated by '-')")
        return tokens


def parse(text: str) -> list[Token]:
    """Parse a network string into its flat, repeat-expanded list of tokens; raises
    :class:`NotationError` (a ``ValueError``) for anything that is not a valid network string."""
    if not isinstance(text, str):
        shown = repr(text)
        raise NotationError(shown, 0, len(shown), f"a network string must be text (str), got {type(text).__name__}")
    return _Parser(text).parse()
