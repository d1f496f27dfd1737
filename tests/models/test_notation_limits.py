"""Notation fixes of issue #13: p0, DP0, ASCII digits only, and limits that point at the token."""
import pytest

from plif.models import NotationError, build_network, parse
from plif.models.notation import MAX_DEPTH, MAX_LAYERS, MAX_REPEAT


def test_padding_zero_override_is_accepted_and_used():
    (conv, _) = parse("c8k3s1p0-FC10")
    assert conv.args == {"out": 8, "k": 3, "s": 1, "p": 0}
    net = build_network("c4k3s1p0-PLIF-FC10-PLIF", (1, 28, 28), T=2)
    assert net.info[0].out_shape == (4, 26, 26)


def test_dp0_is_dropout_with_probability_zero():
    (dp, _) = parse("DP0-FC10")
    assert dp.args["p"] == 0.0
    with pytest.raises(NotationError, match=r"dropout probability 1.5 in 'DP1.5' must be in \[0, 1\)"):
        parse("DP1.5")


def test_full_width_digits_are_refused_at_the_digit():
    with pytest.raises(NotationError) as e:
        parse("FC10-c８k３s１")
    assert e.value.pos == 6 and "is not ASCII" in str(e.value)


def test_repeat_count_cap_points_at_the_count():
    with pytest.raises(NotationError) as e:
        parse("{FC10}*1000000")
    assert e.value.pos == 7 and f"more than {MAX_REPEAT}" in str(e.value)
    assert len(parse(f"{{FC10}}*{MAX_REPEAT}")) == MAX_REPEAT


def test_total_layer_cap():
    with pytest.raises(NotationError, match=f"more than {MAX_LAYERS}") as e:
        parse("{{FC10}*100}*200")
    assert e.value.pos == 13


def test_nesting_depth_cap_has_a_position_not_a_recursion_error():
    text = "{" * 600 + "FC10" + "}*1" * 600
    with pytest.raises(NotationError, match=f"nested more than {MAX_DEPTH} deep") as e:
        parse(text)
    assert e.value.pos == MAX_DEPTH
    deep = "{" * MAX_DEPTH + "FC10" + "}*1" * MAX_DEPTH
    assert len(parse(deep)) == 1


@pytest.mark.parametrize("text,pos,message", [
    ("FC" + "1" * 100_000, 0, "out=1111111111... (100,000 digits) in 'FC111111111111111111'... (100,002 characters) is more than 2147483647"),
    ("c8k3s1p" + "9" * 6000 + "-FC10", 0, "p=9999999999... (6,000 digits)"),
    ("FC10-{FC10}*" + "9" * 5000, 12, "repeat count 9999999999... (5,000 digits) is more than 1000"),
    ("DP" + "9" * 100_000, 0, "dropout probability inf in 'DP999999999999999999'... (100,002 characters)"),
])
def test_a_number_of_any_length_names_its_token_in_a_short_message(text, pos, message):
    """Past Python's 4300-digit limit the error is still a NotationError naming the token, and a
    100,000-character string is shown as an excerpt, not in full."""
    with pytest.raises(NotationError) as e:
        parse(text)
    assert message in str(e.value) and e.value.pos == pos
    assert len(str(e.value)) < 500


def test_leading_zeros_do_not_count_against_the_number():
    assert parse("c" + "0" * 5000 + "8k3s1")[0].args["out"] == 8


@pytest.mark.parametrize("text,message", [
    (None, "must be text (str), got NoneType"),
    (128, "must be text (str), got int"),
    (b"FC10", "must be text (str), got bytes"),
    ("FC10-\x00", "unknown token '\\x00'"),
    ("FC\udcff10", "'\\udcff' is not ASCII"),
    ("DP1e5", "unknown token 'DP1e5'"),
    ("{FC10}*1-}", "'}' without a matching '{'"),
])
def test_every_parse_failure_is_a_notation_error(text, message):
    with pytest.raises(NotationError) as e:  # NotationError is a ValueError, as before
        parse(text)
    assert message in str(e.value)
    str(e.value).encode("utf-8")  # printable: control characters and lone surrogates escaped


def test_an_escaped_character_keeps_the_caret_under_it():
    with pytest.raises(NotationError) as e:
        parse("FC10-\x00-BN")
    shown, caret = str(e.value).splitlines()[-2:]
    assert shown == "  FC10-\\x00-BN" and caret.index("^") == shown.index("\\x00") and caret.count("^") == 4


def test_random_strings_parse_or_raise_notation_error_only():
    import random

    rng = random.Random(0)
    alphabet = list("{}*-. 0123456789ckspBNPLIFMADC") + ["\x00", "\udcff", "８", "9" * 5000]
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        try:
            parse(text)
        except NotationError:
            pass
