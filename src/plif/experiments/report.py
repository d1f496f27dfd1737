"""``report.md`` and figures from run folders: our accuracies beside the paper's, Fig. 5 (test
accuracy over epochs, PLIF vs LIF), Fig. 6 (tau of every layer over training) and the epochs and
wall time each run needed to reach given accuracies.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..surrogate import PAPER_SURROGATE, unless_paper
from .figures import FigureOutput, moving_average, new_figure, save_csv, save_figure, save_json
from .paper_numbers import paper_accuracy
from .runs import RunRecord, expand_run_paths, read_run

__all__ = ["ReportRow", "report_rows", "recipe_notes", "time_to_accuracy", "write_report", "DEFAULT_TARGETS"]

DEFAULT_TARGETS = (0.5, 0.8, 0.9, 0.95, 0.99)
PAPER_VAL_SPLIT = 0.15  # protocol B: 15 % of each class of the training set (supplement)


@dataclass
class ReportRow:
    """One run's line of the accuracy table (accuracies in %, differences in percentage points)."""

    label: str
    dataset: str
    setting: str
    epochs: str
    acc_a: float | None
    acc_a_epoch: int | None
    paper_a: float | None
    acc_b: float | None
    acc_b_epoch: int | None
    paper_b: float | None
    source: str
    protocol: str

    @property
    def diff_a(self) -> float | None:
        return None if self.acc_a is None or self.paper_a is None else self.acc_a - self.paper_a

    @property
    def diff_b(self) -> float | None:
        return None if self.acc_b is None or self.paper_b is None else self.acc_b - self.paper_b


def _protocol(run: RunRecord) -> str:
    """How far the run is from the paper's protocol, in a few words (empty: it is the paper's)."""
    from ..catalog import get_dataset
    from ..models.run_network import network_label, run_model
    from ..train.config import PRESETS  # here: reading runs needs no training stack

    c = run.config
    notes = []
    try:
        entry = get_dataset(run.dataset)
        if run_model(c) is not None:
            notes.append(network_label(c))
        elif c.get("network") not in (entry.network, entry.authors_network):
            notes.append("smaller network")
        if c.get("T") != entry.T:
            notes.append(f"T={c.get('T')} (paper {entry.T})")
    except ValueError:
        notes.append("dataset not in the paper")
    if c.get("max_train_samples"):
        notes.append(f"{c['max_train_samples']} train samples")
    if c.get("max_test_samples"):
        notes.append(f"{c['max_test_samples']} test samples")
    if c.get("max_val_samples") and c.get("val_split"):
        notes.append(f"{c['max_val_samples']} validation samples (paper: all of its {PAPER_VAL_SPLIT:.0%})")
    if c.get("val_split") and c["val_split"] != PAPER_VAL_SPLIT:
        notes.append(f"val split {c['val_split']:g} (paper {PAPER_VAL_SPLIT:g})")
    notes.append(unless_paper(run.setting.surrogate, f"surrogate {{}} (paper {PAPER_SURROGATE})"))
    if (c.get("epochs") or 0) < PRESETS["paper"]["epochs"]:
        notes.append(f"{c.get('epochs')} epochs (paper {PRESETS['paper']['epochs']})")
    for key, name in (("batch_size", "batch"), ("lr", "lr"), ("t_max", "T_max")):  # absent in older runs
        ours, paper = c.get(key), PRESETS["paper"][key]
        if ours is not None and ours != paper:
            notes.append(f"{name} {ours:g} (paper {paper:g})")
    notes += recipe_notes(c)
    return ", ".join(filter(None, notes))


def recipe_notes(config: dict) -> list[str]:
    """The training recipe of a run's ``config`` where it is not the paper's (MSE on the firing rate,
    Adam, no weight decay, no warm-up; ``plif train --loss``, ``--optimizer``, ...), in a few words
    each; a run recorded before these settings existed ran the paper's."""
    from ..train.config import ABSENT_MEANS  # what a config without the key ran with

    c = {**ABSENT_MEANS, **config}
    notes = []
    if c["loss"] != "mse":
        extra = [f"label smoothing {c['label_smoothing']:g}"] if c["label_smoothing"] else []
        if c["loss"] == "tet":
            extra.append(f"λ {c['tet_lambda']:g}, φ {c['tet_phi']:g}")
        notes.append(f"loss {c['loss']} ({'; '.join([*extra, 'paper mse'])})")
    if c["optimizer"] != "adam":
        notes.append(f"{c['optimizer'].upper()} momentum {c['momentum']:g}" + (", Nesterov" if c["nesterov"] else "")
                     + " (paper Adam)")
    if c["weight_decay"]:
        notes.append(f"weight decay {c['weight_decay']:g} (paper 0)")
    if c["warmup_epochs"]:
        notes.append(f"{c['warmup_epochs']} warm-up epoch{'s' if c['warmup_epochs'] > 1 else ''} (paper none)")
    return notes


def report_rows(runs: list[RunRecord]) -> list[ReportRow]:
    rows = []
    for run in runs:
        setting = run.setting
        pa, pb, source = paper_accuracy(run.dataset, setting)
        a, b = run.accuracy_a(), run.accuracy_b()
        epochs = f"{len(run.metrics)}/{run.config.get('epochs', '?')}"
        rows.append(ReportRow(run.label, run.dataset, setting.label(), epochs,
                              None if a is None else 100 * a[0], None if a is None else a[1], pa,
                              None if b is None else 100 * b[0], None if b is None else b[1], pb,
                              source, _protocol(run)))
    return rows


def time_to_accuracy(metrics: list[dict], target: float) -> tuple[int, float] | None:
    """``(first epoch with test accuracy >= target, wall seconds up to its end)``, or ``None``."""
    wall = 0.0
    for m in metrics:
        wall += float(m.get("epoch_time_s", 0.0))
        if m.get("test_acc", -1.0) >= target:
            return int(m["epoch"]), wall
    return None


def _pct(v, signed=False):
    if v is None:
        return "–"
    return f"{v:+.2f}" if signed else f"{v:.2f}"


def _accuracy_table(rows: list[ReportRow]) -> list[str]:
    lines = ["| run | dataset | setting | epochs | A (%) | paper A | Δ A (pp) | B (%) | paper B | Δ B (pp) | paper source | differs from paper protocol |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        a = _pct(r.acc_a) + (f" (ep {r.acc_a_epoch})" if r.acc_a_epoch else "")
        b = _pct(r.acc_b) + (f" (ep {r.acc_b_epoch})" if r.acc_b_epoch else "")
        lines.append(f"| {r.label} | {r.dataset} | {r.setting} | {r.epochs} | {a} | {_pct(r.paper_a)} | "
                     f"{_pct(r.diff_a, True)} | {b} | {_pct(r.paper_b)} | {_pct(r.diff_b, True)} | "
                     f"{r.source or '–'} | {r.protocol or '–'} |")
    return lines


def _time_table(runs: list[RunRecord], targets) -> tuple[list[str], list[dict]]:
    head = "| run | " + " | ".join(f"≥ {t:.0%}: epoch, wall" for t in targets) + " |"
    lines = [head, "|---|" + "---|" * len(targets)]
    data = []
    for run in runs:
        cells, entry = [], {"run": run.label, "targets": {}}
        for t in targets:
            hit = time_to_accuracy(run.metrics, t)
            entry["targets"][f"{t:g}"] = None if hit is None else {"epoch": hit[0], "wall_s": hit[1]}
            cells.append("not reached" if hit is None else f"{hit[0]}, {hit[1]:.0f} s")
        lines.append(f"| {run.label} | " + " | ".join(cells) + " |")
        data.append(entry)
    return lines, data


_MARKERS = "osD^vPXh*p"
_LIF_DASHES = (0, (7, 3.5))


def _accuracy_figure(runs: list[RunRecord], path: Path, output: FigureOutput) -> Path | None:
    """Fig. 5: test accuracy over epochs, one panel per dataset; LIF dashed, PLIF solid."""
    import matplotlib

    with_data = [r for r in runs if any("test_acc" in m for m in r.metrics)]
    if not with_data:
        return None
    with matplotlib.rc_context({"lines.scale_dashes": False}):  # dash lengths in points at every line width
        return _accuracy_panels(with_data, path, output)


def _accuracy_panels(with_data: list[RunRecord], path: Path, output: FigureOutput) -> Path:
    from matplotlib.ticker import MaxNLocator

    datasets = sorted({r.dataset for r in with_data})
    fig, axes = new_figure(6.4 * len(datasets), 4.2, 1, len(datasets))
    series = []
    for ax, ds in zip(axes[0], datasets):
        epochs_here = set()
        here = [r for r in with_data if r.dataset == ds]
        for i, r in enumerate(here):
            below = len(here) - 1 - i  # runs drawn after (above) this one
            ep = [m["epoch"] for m in r.metrics if "test_acc" in m]
            acc = [100 * m["test_acc"] for m in r.metrics if "test_acc" in m]
            epochs_here.update(ep)
            # identical curves must stay visible: each later run is drawn on top, thinner, with its own
            # open marker, so runs that coincide show as nested lines and markers, not as one line
            style = dict(linestyle=_LIF_DASHES if r.setting.neuron != "plif" else "-", zorder=2 + i,
                         linewidth=min(1.2 + 1.3 * below, 6.0))
            marker = dict(marker=_MARKERS[i % len(_MARKERS)], markersize=min(4.0 + 2.5 * below, 14.0),
                          markerfacecolor="none", markevery=max(1, len(acc) // 12))
            # the paper plots 64-epoch moving averages over shaded raw data; short runs show raw data only
            if len(acc) >= 128:
                line, = ax.plot(ep, moving_average(acc, 64), **style, **marker, label=f"{r.label} (64-epoch mean)")
                ax.plot(ep, acc, color=line.get_color(), alpha=0.25, linewidth=0.8, zorder=1)
            else:
                ax.plot(ep, acc, **style, **marker, label=r.label)
            series.append({"run": r.label, "dataset": ds, "setting": r.setting.label(), "epoch": ep, "test_acc_pct": acc})
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if len(epochs_here) == 1:  # one point: the locator would invent fractional epochs around it
            ax.set_xticks(sorted(epochs_here))
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(f"{ds}: test accuracy during training (PLIF solid, LIF/IF dashed)", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, handlelength=4.5)  # long enough handles to show LIF's dashes
    path = save_figure(fig, path, output)[0]
    save_json(path.with_suffix(".json"), {"series": series})
    save_csv(path.with_suffix(".csv"), ["run", "dataset", "setting", "epoch", "test_acc_pct"],
             ((s["run"], s["dataset"], s["setting"], e, a) for s in series for e, a in zip(s["epoch"], s["test_acc_pct"])))
    return path


def _greek(label: str) -> str:
    """``PLIF(tau0=2)`` -> ``PLIF(τ₀=2)`` in mathtext, for figure text (tables keep the plain name)."""
    return label.replace("tau0", "$\\tau_0$").replace("tau=", "$\\tau$=")


def _tau_figure(runs: list[RunRecord], path: Path, output: FigureOutput) -> Path | None:
    """Fig. 6: tau(i) of every PLIF layer over training, one panel per run."""
    from matplotlib.ticker import MaxNLocator

    with_taus = [r for r in runs if r.taus()]
    if not with_taus:
        return None
    fig, axes = new_figure(6.4, 3.2 * len(with_taus), len(with_taus), 1)
    series = []
    for ax, r in zip(axes[:, 0], with_taus):
        taus = r.taus()
        epochs = [m["epoch"] for m in r.metrics if m.get("taus")]
        if r.setting.neuron == "plif":  # every PLIF layer starts at tau0 exactly (w0 = -log(tau0 - 1))
            taus, epochs = [[r.setting.tau0] * len(taus[0])] + taus, [0] + epochs
        for i in range(len(taus[0])):
            ax.plot(epochs, [row[i] for row in taus], marker="o" if len(epochs) < 30 else None, markersize=3,
                    label=f"$\\tau_{{{i + 1}}}$")
        ax.set_xlabel("epoch (0 = initial value)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if len(set(epochs)) == 1:  # one point: the locator would invent fractional epochs around it
            ax.set_xticks(sorted(set(epochs)))
        ax.set_ylabel("membrane time constant $\\tau$ (time-steps)")
        ax.set_title(f"{r.label} ({r.dataset}, {_greek(r.setting.label())})", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        series.append({"run": r.label, "epoch": epochs, "taus": taus})
    path = save_figure(fig, path, output)[0]
    save_json(path.with_suffix(".json"), {"note": "tau(i): the i-th PLIF layer; value at the end of each epoch",
                                          "series": series})
    return path


def write_report(paths, out: str | Path, targets=DEFAULT_TARGETS, log=print,
                 output: FigureOutput | None = None) -> Path:
    """Read run and sweep folders ``paths``, write ``report.md``, ``report.json`` and figures to ``out``
    (in the formats of ``output``; report.md shows the first).  A failure leaves no new file or folder."""
    from ..atomic import new_files_undone

    with new_files_undone(out):
        return _write_report(paths, out, targets, log, output)


def _write_report(paths, out, targets, log, output) -> Path:
    out, output = Path(out), output or FigureOutput()
    runs, problems = [], []
    for path, label in expand_run_paths(paths):
        try:
            run = read_run(path, label)
        except (FileNotFoundError, ValueError) as e:
            problems.append(f"{label}: skipped: {e}")
            continue
        if not run.metrics:
            problems.append(f"{label} ({path}): no epoch recorded yet; only listed")
        for note in run.notes:
            problems.append(f"{label} ({path}): {note}")
        runs.append(run)
    for p in problems:
        log(f"note: {p}")
    if not runs:
        raise FileNotFoundError("no run folder could be read:\n  " + "\n  ".join(problems))

    rows = report_rows(runs)
    time_lines, time_data = _time_table(runs, targets)
    figures = [f for f in (_accuracy_figure(runs, out / "test_accuracy.png", output),
                           _tau_figure(runs, out / "taus.png", output)) if f]
    md = ["# PLIF reproduction report", "",
          "Accuracy A = max test accuracy over epochs (paper Table 3); B = test accuracy at the epoch of best "
          "validation accuracy (supplement; needs a run with --val-split). Δ = ours − paper, in percentage "
          "points. Paper numbers: Table 3 / supplement for PLIF(tau0=2) with max pooling, Table 4 for "
          "PLIF vs LIF, Table 5 for average pooling. A run far from the paper's protocol (last column) is "
          "not expected to match it.", ""]
    md += _accuracy_table(rows)
    md += ["", "## Epochs and wall time to reach test accuracy", "",
           "Wall time = sum of the run's epoch times (training + evaluation) up to that epoch.", ""]
    md += time_lines
    if figures:
        md += ["", "## Figures", ""]
        titles = {"test_accuracy": "Test accuracy over epochs, PLIF vs LIF (paper Fig. 5)",
                  "taus": "τ of every PLIF layer over training (paper Fig. 6)"}
        for f in figures:
            md += [f"![{titles[f.stem]}]({f.name})", "", f"*{titles[f.stem]}; data: {f.stem}.json*", ""]
    if problems:
        md += ["", "## Notes on the run folders", ""] + [f"- {p}" for p in problems]
    runs_md = ["", "## Runs", ""] + [f"- {r.label}: `{r.path}` — {r.setting.label()}, network "
                                      f"`{r.config.get('network')}`, T={r.config.get('T')}, seed {r.config.get('seed')}" for r in runs]
    from ..atomic import atomic_write_bytes

    report = out / "report.md"
    atomic_write_bytes(report, ("\n".join(md + runs_md) + "\n").encode())
    save_json(out / "report.json", {
        "accuracy": [{**r.__dict__, "diff_a": r.diff_a, "diff_b": r.diff_b} for r in rows],
        "time_to_accuracy": time_data, "notes": problems,
        "runs": [{"label": r.label, "path": str(r.path)} for r in runs]})
    return report
