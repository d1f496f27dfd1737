"""``plif ablate`` (the paper's ablation sweep), ``plif report`` and ``plif plot neuron|encoder``."""
from __future__ import annotations

import shlex


# set by each ablation entry, so not flags of plif ablate; --out names the sweep folder there
ABLATE_EXCLUDES = ("neuron", "tau0", "pool", "out")


def run_ablate(args) -> int:
    from pathlib import Path

    from ..experiments import run_sweep
    from ..train import TrainConfig
    from .config_flags import flag_name, given_settings

    kw = given_settings(args, exclude=ABLATE_EXCLUDES)
    base = TrainConfig(**kw)
    out = Path(args.out) if args.out else Path("runs") / f"ablate-{base.dataset}"
    only = [s.strip() for s in args.only.split(",") if s.strip()] if args.only else None
    command = f"plif ablate --dataset {base.dataset} " + " ".join(
        (flag_name(k) if v is True else "--no-" + flag_name(k)[2:] if v is False
         else f"{flag_name(k)} {shlex.quote(str(v))}")
        for k, v in vars(args).items() if v is not None and k not in ("func", "command", "debug", "dataset"))
    sweep = run_sweep(base, out, only=only, command=command)
    print(f"sweep folder: {sweep}\nreport: plif report {sweep} --out {sweep / 'report'}")
    return 0


def run_report(args) -> int:
    from ..experiments import write_report

    output = _figure_output(args)  # a bad --format/--dpi fails before any run folder is read
    targets = None
    if args.targets:
        try:
            targets = [float(t) / (100 if float(t) > 1 else 1) for t in args.targets.split(",")]
        except ValueError:
            raise ValueError(f"--targets: expected comma-separated accuracies like 0.9,0.95 or 90,95, got {args.targets!r}") from None
    kwargs = {"targets": targets} if targets else {}
    report = write_report(args.runs, args.out, output=output, **kwargs)
    print(f"report: {report}")
    return 0


def _figure_output(args):
    from ..experiments.figures import FigureOutput

    return FigureOutput.parse(args.format, args.dpi)


def _add_figure_flags(p) -> None:
    p.add_argument("--format", default="png", help="figure formats, comma-separated: png, pdf, svg [png]")
    p.add_argument("--dpi", type=int, help="resolution of PNG (and of images inside a PDF) [300]")


# plot encoder's options: each flag's dest -> plot_encoder_figures' keyword (its default where left out)
ENCODER_OPTIONS = {"channels": "channels", "samples": "samples", "layer": "layer", "event": "event_file",
                   "data_dir": "data_dir", "checkpoint": "which", "trust_module": "trust_modules"}


def run_plot(args) -> int:
    from .config_flags import flag_name

    output = _figure_output(args)
    given = [k for k in ENCODER_OPTIONS if getattr(args, k) not in (None, [])]
    encoder_given = [flag_name(k) for k in given]
    if args.what == "neuron":
        if args.run:
            raise ValueError(f"plot neuron takes no run folder (got {args.run!r})")
        if encoder_given:
            raise ValueError(f"{', '.join(encoder_given)}: no effect on plot neuron (options of plot encoder RUN)")
        from ..experiments import plot_neuron_figures

        steps = {} if args.steps is None else {"steps": args.steps}  # left out: plot_neuron_figures' default
        paths = plot_neuron_figures(args.out, output=output, **steps)
    else:
        from ..experiments import plot_encoder_figures

        if not args.run:
            raise ValueError("plot encoder needs a run folder: plif plot encoder RUN --out DIR")
        if args.steps is not None:
            raise ValueError("--steps: no effect on plot encoder (the run's T sets the steps; --steps is plot neuron's)")
        paths = plot_encoder_figures(args.run, args.out, output=output,
                                     **{ENCODER_OPTIONS[k]: getattr(args, k) for k in given})
    for p in paths:
        print(p)
    return 0


def register(sub) -> None:
    from ..experiments.ablation import ABLATIONS

    from .checks import add_trust_flag
    from .config_flags import add_config_flags

    a = sub.add_parser("ablate", help="the paper's ablations (Tables 4, 5) as one resumable sweep of run folders")
    a.add_argument("--only", help=f"comma-separated subset of: {', '.join(ABLATIONS)}")
    a.add_argument("--out", help="sweep folder [runs/ablate-<dataset>]")
    a.add_argument("--debug", action="store_true", help="show tracebacks")
    add_config_flags(a, exclude=ABLATE_EXCLUDES)
    a.set_defaults(func=run_ablate)

    r = sub.add_parser("report", help="report.md with accuracies beside the paper's, and figures, from run folders")
    r.add_argument("runs", nargs="+", metavar="RUN", help="run folders or sweep folders")
    r.add_argument("--out", required=True, help="folder for report.md and the figures")
    r.add_argument("--targets", help="test accuracies for the time-to-accuracy table [0.5,0.8,0.9,0.95,0.99]")
    r.add_argument("--debug", action="store_true")
    _add_figure_flags(r)
    r.set_defaults(func=run_report)

    p = sub.add_parser("plot", help="paper figures: 'neuron' (Figs. 1b, 2) or 'encoder RUN' (firing-rate maps)")
    p.add_argument("what", choices=("neuron", "encoder"))
    p.add_argument("run", nargs="?", help="run folder (encoder)")
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, help="neuron: ms simulated (dt = 1 ms) [200]")
    p.add_argument("--channels", help="encoder: comma-separated channels of the spiking layer [0,1,2,3]")
    p.add_argument("--samples", type=int, help="encoder: test samples (0: only --event) [4]")
    p.add_argument("--layer", type=int, help="encoder: spiking layer, 0 = the encoder's [0]")
    p.add_argument("--event", help="encoder: an event file (N-MNIST .bin, AEDAT) to show as well")
    p.add_argument("--data-dir", help="encoder: dataset folder if not the run's")
    p.add_argument("--checkpoint", help="encoder: best, best_test, best_val or last [best]")
    p.add_argument("--debug", action="store_true")
    add_trust_flag(p)
    _add_figure_flags(p)
    p.set_defaults(func=run_plot)
