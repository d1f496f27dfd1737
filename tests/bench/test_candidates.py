"""Candidates against the baseline: built and timed inside their own context, the baseline outside,
side by side; a broken candidate keeps the others' rows."""
import contextlib
import time

import pytest

from plif.bench import neuron as bn
from plif.bench.candidates import PairRow, check_candidate, run_candidates
from plif.neurons import PLIF

SWITCH = {"on": False, "scale": 1.0}
NARROW = "c4k3s1-BN-PLIF-MPk2s2-DP-FC20-PLIF-DP-FC100-PLIF-APk10s10"


class Candidate:
    def __init__(self, name, kind, scale=1.0, **extra):
        self.name, self.kind, self.decides, self.scale = name, kind, f"whether {name} wins", scale
        self.__dict__.update(extra)

    def apply(self):
        @contextlib.contextmanager
        def on():
            SWITCH.update(on=True, scale=self.scale)
            try:
                yield
            finally:
                SWITCH.update(on=False, scale=1.0)
        return on()


@pytest.fixture
def seen(monkeypatch):
    """Record whether the switch was on when a PLIF layer was built and each time one was called."""
    log = {"built": [], "called": []}
    init, forward = PLIF.__init__, PLIF.forward

    def built(self, *a, **k):
        log["built"].append(SWITCH["on"])
        init(self, *a, **k)
        self.built_switched_on = SWITCH["on"]

    def called(self, x, *a, **k):  # (built as the candidate, called with the switch on)
        log["called"].append((self.built_switched_on, SWITCH["on"]))
        return forward(self, x * SWITCH["scale"], *a, **k)

    monkeypatch.setattr(PLIF, "__init__", built)
    monkeypatch.setattr(PLIF, "forward", called)
    monkeypatch.setitem(bn.CASES, "tiny", (3, 2, 4, 5, 5))
    return log


def test_neuron_candidate_is_built_and_called_inside_its_context(seen):
    rows = run_candidates([Candidate("same", "neuron")], "cpu", time.monotonic() + 60, ["tiny"], rounds=3,
                          log=lambda *_: None)
    (row,) = rows
    assert (row.candidate, row.case, row.rounds, row.agrees) == ("same", "tiny fwd+bwd", 3, True)
    assert row.baseline_ms > 0 and row.candidate_ms > 0 and row.ratio > 0
    assert row.extra["device_time"] == "needs CUDA" and row.extra["copy_bound_ms"] > 0
    assert seen["built"] == [False, True]  # the baseline outside, the candidate inside
    calls = seen["called"]  # every candidate call inside its context, every baseline call outside
    assert set(calls) == {(True, True), (False, False)}
    assert calls.count((True, True)) > 3 and calls.count((False, False)) > 3


def test_a_candidate_that_changes_the_result_does_not_agree(seen):
    (row,) = run_candidates([Candidate("wrong", "neuron", scale=3.0)], "cpu", time.monotonic() + 60, ["tiny"],
                            rounds=2, log=lambda *_: None)
    assert row.agrees is False


def test_train_candidate_on_the_cpu_times_eager_and_says_the_graph_needs_cuda(seen):
    rows = run_candidates([Candidate("step", "train")], "cpu", time.monotonic() + 120, train_batches=(2,), T=1,
                          rounds=2, log=lambda *_: None, train_network=NARROW)
    assert [(r.case, r.note) for r in rows] == [("fashion-mnist paper step B2 eager", ""),
                                                ("fashion-mnist paper step B2 cuda-graph", "needs CUDA")]
    assert rows[0].ratio > 0 and rows[0].extra == {"device_time": "needs CUDA"}
    assert seen["built"] == [False] * 3 + [True] * 3  # 3 PLIF layers per network


def test_broken_and_late_candidates_keep_the_others(seen):
    class Broken(Candidate):
        def apply(self):
            raise RuntimeError("kernel variant missing")

    rows = run_candidates([Broken("broken", "neuron"), object()], "cpu", time.monotonic() + 60, ["tiny"],
                          log=lambda *_: None)
    rows += run_candidates([Candidate("late", "neuron", cases=["tiny"])], "cpu", time.monotonic() - 1, ["nope"],
                           log=lambda *_: None)
    assert [(r.candidate, r.note) for r in rows] == [
        ("broken", "failed: RuntimeError: kernel variant missing"),
        ("#1", "not a candidate: needs str attributes name, kind, decides"),
        ("late", "not run: time budget spent")]  # its own cases, not the default ones
    assert check_candidate(Candidate("x", "kernel")) == "kind 'kernel': must be 'neuron' or 'train'"
    assert isinstance(rows[0], PairRow)
