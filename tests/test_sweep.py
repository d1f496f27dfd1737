"""The bad-input sweep (tests/sweep): its judge, one real case end to end, and (only when asked:
``pytest -m sweep``) every case."""
import os

import pytest

from sweep import run as sweep


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
def test_judge_sorts_every_outcome(rc, err, expect, outcome):
    case = sweep.Case("c", "options", ["spec"], expect=expect)
    assert sweep.judge(case, sweep.Result(rc, "", err, 0.1), None) == outcome


def test_a_check_that_finds_a_loss_wins_over_a_clean_refusal():
    case = sweep.Case("c", "run", ["train"])
    assert sweep.judge(case, sweep.Result(2, "", "plif train: error: x\n", 0.1), "last.pt deleted") == "lost"


def test_braces_of_the_notation_survive_the_substitution():
    assert sweep.fill("{c8k3s1-PLIF}*2 in {tmp}", {"tmp": "/x"}) == "{c8k3s1-PLIF}*2 in /x"


def test_one_real_case_runs_plif_and_is_refused(tmp_path):
    case = next(c for c in sweep.load_cases() if c.name == "spec-unknown-token")
    res = sweep.run_case(case, tmp_path, sweep.plif_env())
    assert res["outcome"] == "refused", res
    assert "XX" in res["message"]


@pytest.mark.sweep
def test_every_case_is_refused_in_one_line_or_runs(tmp_path):
    """All 1131 cases (about half an hour on 2 cores): ``pytest -m sweep tests/test_sweep.py``, with
    ``PLIF_SWEEP_JOBS`` cases at once [2]; the same as ``python -m tests.sweep --jobs N``."""
    jobs = os.environ.get("PLIF_SWEEP_JOBS", "2")
    assert sweep.main(["--jobs", jobs, "--json", str(tmp_path / "sweep.json")]) == 0
