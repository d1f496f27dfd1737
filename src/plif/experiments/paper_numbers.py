"""The paper's reported accuracies (%), keyed by dataset and by the setting that produced them.

Sources in ``paper/plif-iccv2021.tex``: Table 3 (``tab:ACC CMP``, accuracy A), the supplement's
``tab:ACC VAL`` (A and B), Table 4 (``table: LIF vs PLIF``) and Table 5 (``table: max vs avg``).
``tests/experiments/test_paper_numbers.py`` checks every number here against that text.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..catalog import DATASETS
from ..surrogate import PAPER_SURROGATE, unless_paper

__all__ = ["Setting", "PAPER_SETTING", "MAIN_RESULTS", "ABLATION_RESULTS", "paper_accuracy"]


@dataclass(frozen=True)
class Setting:
    """What the paper varies between its runs: the neuron, its (initial) tau and the pooling; and the
    surrogate gradient, which the paper keeps at :data:`plif.surrogate.PAPER_SURROGATE` but a run may change.

    The ablation sweep runs each setting of :data:`ABLATION_RESULTS` (named by :meth:`name`, with
    :meth:`overrides` of the base config, whose surrogate it keeps); the report looks up what the paper
    reports for it."""

    neuron: str  # "plif" | "lif" | "if"
    tau0: float
    pool: str  # "max" | "avg"
    surrogate: str = PAPER_SURROGATE  # a name of plif.surrogate, or MODULE:NAME

    def label(self) -> str:
        """A readable name, e.g. ``PLIF(tau0=2), max-pool``; the surrogate is named where it is not the
        paper's: ``PLIF(tau0=2), max-pool, sigmoid surrogate``."""
        name = f"PLIF(tau0={self.tau0:g})" if self.neuron == "plif" else f"{self.neuron.upper()}(tau={self.tau0:g})"
        other = unless_paper(self.surrogate)
        return f"{name}, {self.pool}-pool{other}"

    def name(self) -> str:
        """The sweep's name for it (its run folder): ``plif-tau2``, ``lif-tau16``, ``plif-tau2-avgpool``."""
        return f"{self.neuron}-tau{self.tau0:g}" + ("-avgpool" if self.pool == "avg" else "")

    def overrides(self) -> dict:
        """The config fields it sets."""
        return {"neuron": self.neuron, "tau0": self.tau0, "pool": self.pool}

    def tables(self) -> str:
        """The paper's tables that report it."""
        if self == PAPER_SETTING:
            return "Table 4, Table 5 (max)"
        return "Table 5 (average)" if self.pool == "avg" else "Table 4"


# the proposed method: PLIF, tau0 = 2, max pooling (Table 3 and the supplement)
PAPER_SETTING = Setting("plif", 2.0, "max")
"""The paper's proposed method: PLIF, τ0 = 2, max pooling."""

# dataset -> (accuracy A, accuracy B) for PAPER_SETTING: ``paper_accuracy`` of each dataset's record
MAIN_RESULTS: dict[str, tuple[float, float]] = {n: d.paper_accuracy for n, d in DATASETS.items() if d.paper_accuracy}
"""Dataset -> the paper's (accuracy A, accuracy B) in % for :data:`PAPER_SETTING` (Table 3, supplement)."""

_T4_T5_DATASETS = ("fashion-mnist", "cifar10", "cifar10-dvs", "dvs128-gesture")


def _row(values):
    return dict(zip(_T4_T5_DATASETS, values))


# setting -> dataset -> accuracy A (Tables 4 and 5, in the order the sweep runs them); their max-pool
# PLIF(2) row repeats Table 3, so it is read from the dataset records, not written again
ABLATION_RESULTS: dict[Setting, dict[str, float]] = {
    PAPER_SETTING: {d: MAIN_RESULTS[d][0] for d in _T4_T5_DATASETS},
    Setting("lif", 2.0, "max"): _row((94.17, 93.03, 73.60, 96.88)),
    Setting("plif", 16.0, "max"): _row((94.65, 93.23, 70.50, 92.01)),
    Setting("lif", 16.0, "max"): _row((94.47, 47.50, 62.40, 76.74)),
    Setting("plif", 2.0, "avg"): _row((94.74, 93.30, 72.70, 97.22)),
}
"""Setting -> dataset -> the paper's accuracy A in % (Tables 4 and 5)."""


def paper_accuracy(dataset: str, setting: Setting) -> tuple[float | None, float | None, str]:
    """``(A, B, source)`` the paper reports for ``setting`` on ``dataset``; ``None`` where it has none.
    A setting with another surrogate gets the paper's numbers of its neuron, tau and pooling (the
    report says the surrogate differs)."""
    setting = dataclasses.replace(setting, surrogate=PAPER_SURROGATE)
    if setting == PAPER_SETTING and dataset in MAIN_RESULTS:
        a, b = MAIN_RESULTS[dataset]
        return a, b, "Table 3 / supplement"
    row = ABLATION_RESULTS.get(setting, {})
    if dataset in row:
        table = "Table 5" if setting.pool == "avg" else "Table 4"
        return row[dataset], None, table
    return None, None, ""
