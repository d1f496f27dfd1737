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
