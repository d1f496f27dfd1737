import pytest

from plif.catalog import DATASETS
from plif.models import NotationError, parse

PAPER_STRINGS = sorted({e.network for e in DATASETS.values()}
                       | {e.authors_network for e in DATASETS.values() if e.authors_network})


@pytest.mark.parametrize("text", PAPER_STRINGS)
def test_paper_strings_parse(text):
    tokens = parse(text)
    # the paper's networks end in its voting layer; the audio ones (SHD, SSC) in one neuron per class
    assert tokens[-1].text == "APk10s10" or [t.kind for t in tokens[-2:]] == ["fc", "neuron"]
    assert all(t.text in text for t in tokens)


def test_repeat_expansion_and_nesting():
    toks = parse("{{c256k3s1-BN-PLIF}*3-MPk2s2}*2-DP-FC2048")
    kinds = [t.kind for t in toks]
    assert kinds == (["conv", "bn", "neuron"] * 3 + ["pool"]) * 2 + ["dropout", "fc"]
    assert toks[0].args == {"out": 256, "k": 3, "s": 1}
    assert toks[-1].args == {"out": 2048}


def test_token_arguments():
    (c, mp, dp, dp3, fc) = parse("c64k5s2p1-MPk3s2-DP-DP0.3-FC10")
    assert c.args == {"out": 64, "k": 5, "s": 2, "p": 1}
    assert mp.args == {"op": "MP", "k": 3, "s": 2}
    assert dp.args == {"p": 0.5} and dp3.args == {"p": 0.3}
    assert fc.args == {"out": 10}


def test_whitespace_is_ignored():
    assert [t.text for t in parse(" { c8k3s1 - PLIF }*2 - FC10 ")] == ["c8k3s1", "PLIF"] * 2 + ["FC10"]


@pytest.mark.parametrize("text,pos,message", [
    ("c128k3s1-BN-PLYF-FC10", 12, "unknown token 'PLYF'"),
    ("c128k3s1-XX", 9, "unknown token 'XX'"),
    ("{c128k3s1-BN-PLIF-MPk2s2*2-DP", 0, "never closed"),
    ("c128k3s1-BN}*2", 11, "without a matching"),
    ("{c128k3s1-BN}*x-DP", 14, "bad repeat count 'x'"),
    ("{c128k3s1-BN}*0-DP", 14, "bad repeat count 0"),
    ("{c128k3s1-BN}-DP", 13, "must be followed by '*"),
    ("c128k3-BN", 0, "incomplete token 'c128k3'"),
    ("ck3s1", 0, "incomplete token"),
    ("c128k3s1-MPk2-FC10", 9, "pooling needs k<kernel>s<stride>"),
    ("c128k3s1-FC", 9, "needs its width"),
    ("c0k3s1", 0, "must be positive"),
    ("c128k3s1--BN", 9, "expected a layer token"),
    ("c128k3s1-", 9, "end of string"),
    ("", 0, "empty"),
])
def test_errors_point_at_the_token(text, pos, message):
    with pytest.raises(NotationError) as e:
        parse(text)
    assert message in str(e.value)
    assert e.value.pos == pos
    assert text in str(e.value)
    caret_line = str(e.value).splitlines()[-1]
    assert caret_line.index("^") == pos + 2
