"""The bad-input sweep (scripts/sweep): its judge, and one real case end to end."""
import importlib.util
import sys
from pathlib import Path

import pytest

SWEEP = Path(__file__).resolve().parents[1] / "scripts" / "sweep"


@pytest.fixture(scope="module")
def sweep():
    sys.path.insert(0, str(SWEEP))
    spec = importlib.util.spec_from_file_location("sweep_run", SWEEP / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    yield mod
    sys.path.remove(str(SWEEP))


@pytest.mark.parametrize("rc,err,expect,outcome", [
    (2, "plif spec: error: bad token 'XX' at 8\n", "refuse", "refused"),
    (0, "", "refuse", "silent"),
    (1, "Traceback (most recent call last):\n  File ...\nKeyError: 'T'\n", "refuse", "traceback"),
    (2, "plif spec: error: empty(): Overflow\nframe #0: c10::Error::Error\n", "refuse", "traceback"),
    (2, "something went wrong\nand more\n", "refuse", "unclear"),
    (-9, "", "refuse", "crash"),
    (None, "", "refuse", "hang"),
    (0, "", "ok", "ok"),
    (2, "plif train: error: no\n", "ok", "wrong-refusal"),
])
def test_judge_sorts_every_outcome(sweep, rc, err, expect, outcome):
    case = sweep.Case("c", "options", ["spec"], expect=expect)
    assert sweep.judge(case, sweep.Result(rc, "", err, 0.1), None) == outcome


def test_a_check_that_finds_a_loss_wins_over_a_clean_refusal(sweep):
    case = sweep.Case("c", "run", ["train"])
    assert sweep.judge(case, sweep.Result(2, "", "plif train: error: x\n", 0.1), "last.pt deleted") == "lost"


def test_braces_of_the_notation_survive_the_substitution(sweep):
    assert sweep.fill("{c8k3s1-PLIF}*2 in {tmp}", {"tmp": "/x"}) == "{c8k3s1-PLIF}*2 in /x"


def test_one_real_case_runs_plif_and_is_refused(sweep, tmp_path):
    case = next(c for c in sweep.load_cases() if c.name == "spec-unknown-token")
    res = sweep.run_case(case, tmp_path, sweep.plif_env())
    assert res["outcome"] == "refused", res
    assert "XX" in res["message"]
