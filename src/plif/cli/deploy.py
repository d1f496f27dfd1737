"""``plif stats RUN`` (firing rates, SynOps, energy) and ``plif export RUN --nir FILE``."""
from __future__ import annotations

import json
import sys
import warnings


def run_stats(args) -> int:
    from ..deploy import collect_stats, render_stats
    from ..deploy.synthetic import random_batches
    from .run_folder import load_checked_run

    if args.random and args.data_dir is not None:
        raise ValueError("--data-dir has no effect with --random (the input is random, no dataset is read)")
    if not args.random and args.seed is not None:
        raise ValueError("--seed has no effect without --random: it seeds the random input; the test split is "
                         "read in order")
    net, config = load_checked_run(args.run, args.which, args.trust_module)
    from ..layers.precision import run_precision

    amp, said = run_precision(config.get("amp"), "cpu")  # the run's, where this CPU has it natively
    from ..models.run_network import network_label, run_prepare

    if args.random:  # the input the run's network takes: a --model network static images over T
        prepare = run_prepare(lambda x, gen=None: x, config, is_event=False)
        batches = (prepare(x) for x in random_batches(tuple(config["input_shape"]), args.samples, args.batch_size,
                                                      seed=args.seed or 0))
    else:
        batches = _test_batches(args.run, config, args.data_dir, args.samples, args.batch_size)
    from ..progress import sample_bar

    with sample_bar(args.samples, "stats") as bar:
        st = collect_stats(net, batches, max_samples=args.samples, progress=bar, amp=amp, precision=said,
                           T=int(config["T"]), spec=network_label(config))
    print(render_stats(st))
    if args.json:
        from ..atomic import atomic_write_text as write_text_atomic

        write_text_atomic(args.json, json.dumps(st.to_dict(), indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


def _test_batches(run, config: dict, data_dir, samples: int, batch_size: int):
    """The first ``samples`` of the run's test split (:func:`plif.runs.run_test_split`), prepared as
    in training (static images normalised as the supplement's Preprocessing section says,
    ``[B, C, H, W]``; event datasets as frames ``[T, B, 2, H, W]``), with their labels."""
    from ..data.pipeline import eval_batches
    from ..runs import RunFolder, run_test_split

    split, prepare = run_test_split(config, data_dir, samples, source=RunFolder(run).config)
    return eval_batches(split, prepare, batch_size)


def export_defaults(args) -> None:
    """Fill what ``plif export`` left out with the exporters' defaults: None until here, so that
    ``--check`` can tell which export options were given."""
    from ..deploy.nir_targets import DEFAULT_BN, DEFAULT_TARGET

    args.which, args.target, args.bn = args.which or "best", args.target or DEFAULT_TARGET, args.bn or DEFAULT_BN


def run_export(args) -> int:
    if args.check:
        return _check(args)
    if not args.run or not args.nir:
        raise ValueError("plif export needs a run folder and --nir FILE (or --check FILE alone)")
    from ..deploy.nir_export import InexactExportWarning, InexactLeakWarning, export_nir, export_nir_all
    from ..deploy.nir_targets import ALL_TARGETS, TARGETS, target_dt, target_path
    from .run_folder import load_checked_run

    export_defaults(args)

    if args.target == ALL_TARGETS and args.dt is not None:
        raise ValueError("--dt does not go with --for all: each importer's file takes the dt that importer steps "
                         "with (export --for norse or generic --dt DT for one file at yours)")
    if args.target != ALL_TARGETS:
        target_dt(args.target, args.dt)  # refused before loading; None: the exporter picks the target's
    net, config = load_checked_run(args.run, args.which, args.trust_module)
    # the shape, steps and input scaling the run trained with (a --model network knows none of them itself)
    run = dict(input_shape=tuple(config["input_shape"]), T=int(config["T"]), input_scaling=_input_scaling(config))
    with warnings.catch_warnings(record=True) as notes:
        warnings.simplefilter("always", InexactLeakWarning)
        warnings.simplefilter("always", InexactExportWarning)
        if args.target == ALL_TARGETS:
            written = export_nir_all(net, args.nir, verify=not args.no_verify, bn=args.bn,
                                     allow_inexact_dt=args.allow_inexact_dt, **run)
        else:
            written = {args.target: export_nir(net, args.nir, verify=not args.no_verify, dt=args.dt, target=args.target,
                                               bn=args.bn, allow_inexact_dt=args.allow_inexact_dt, **run)}
    for note in notes:
        print(f"note: {note.message}", file=sys.stderr)
    for target, path in written.items():
        if isinstance(path, str):  # --for all: why this importer cannot run the network
            print(f"not written for {target}: {path}")
        else:
            _written(path, target, run["T"], args.bn, every=args.target != ALL_TARGETS)
    if args.target != ALL_TARGETS:
        others = " / ".join(t for t in TARGETS if t != args.target)
        names = ", ".join(target_path(args.nir, t).name for t in TARGETS)
        print(f"for another importer: --for {others}, or --for all for one file per importer ({names})")
    return 0


def _input_scaling(config: dict):
    """``(mean, std)`` per channel the run's static dataset was normalised with (pixels in [0, 1]), None
    for event frames or a dataset this installation does not know."""
    from ..catalog import get_dataset

    try:
        spec = get_dataset(config.get("dataset") or "")
    except ValueError:
        return None
    return None if spec.mean is None else (tuple(spec.mean), tuple(spec.std))


def _written(path, target: str, T: int, bn: str, every: bool) -> None:
    """What export says of a file it wrote: how to load it, and which importers run it (``every``,
    as --check FILE says) or the one it is for."""
    from ..deploy.nir_import import read_graph
    from ..deploy.nir_describe import describe
    from ..deploy.nir_targets import IMPORTER_OF, TARGETS, graph_meta, importer_report

    graph = read_graph(path)
    dt = float(graph_meta(graph, "dt"))
    print(f"wrote {path} (NIR for {target}; {'BN folded' if bn == 'fold' else 'BN exact'}, dt = {dt!r} in "
          f"metadata['dt'], T = {T})")
    print("load it with " + TARGETS[target].load_line(dt).replace("FILE", repr(str(path))))
    if every:
        print(*describe(graph)[1:], sep="\n")  # what --check FILE says of the file written
    else:
        name = IMPORTER_OF[target]
        said = ": " if name == "plif" else " (predicted from the file; plif export --check FILE runs it): "
        print(f"  {name}{said}{dict(importer_report(graph))[name]}")


def _check(args) -> int:
    """``plif export --check FILE``: which importers run the file exactly: each one installed here
    runs it (random input) against plif's importer; the others are predicted from its nodes and
    metadata (for Norse, its BatchNorm nodes measured on this machine), and say so."""
    if args.run or args.nir:
        raise ValueError("--check FILE takes no run folder and no --nir")
    given = [flag for flag, value in (("--which", args.which), ("--for", args.target), ("--dt", args.dt),
                                       ("--bn", args.bn), ("--no-verify", args.no_verify or None),
                                       ("--allow-inexact-dt", args.allow_inexact_dt or None),
                                       ("--trust-module", args.trust_module or None)) if value is not None]
    if given:
        raise ValueError(f"--check FILE only reads the file: {', '.join(given)} {'is' if len(given) == 1 else 'are'} "
                         "for plif export RUN --nir FILE")
    from ..deploy.nir_import import read_graph
    from ..deploy.nir_describe import describe

    lines = describe(read_graph(args.check), run=True, log=lambda line: print(line, file=sys.stderr, flush=True))
    print(f"{args.check}: {lines[0]}", *lines[1:], sep="\n")
    return 0


def register(sub) -> None:
    from ..deploy.nir_targets import ALL_TARGETS, BN_MODES, DEFAULT_TARGET, TARGETS
    from .checks import MAX_INT, MAX_SEED, add_trust_flag, existing_folder, int_in

    p = sub.add_parser("stats", help="per-layer firing rates, synaptic operations and energy estimate of a trained run")
    p.add_argument("run", help="run folder (config.json + checkpoints/)")
    p.add_argument("--which", default="best", help="checkpoint name under checkpoints/ or a .pt path [best]")
    p.add_argument("--samples", type=int_in(1, MAX_INT), default=1000, help="test samples to run [1000]")
    p.add_argument("--batch-size", type=int_in(1, MAX_INT), default=64, help="batch size [64]")
    p.add_argument("--data-dir", type=existing_folder,
                   help="dataset root (default: the data package's default location)")
    p.add_argument("--random", action="store_true", help="use random normal input instead of the test set")
    p.add_argument("--seed", type=int_in(0, MAX_SEED), help="seed of --random input (0 to 2^32-1) [0]")
    p.add_argument("--json", help="also write the statistics as JSON to this file")
    add_trust_flag(p)
    p.set_defaults(func=run_stats)

    e = sub.add_parser("export", help="export a trained run to NIR (Neuromorphic Intermediate Representation), "
                                      "or say which importers run a NIR file exactly (--check FILE)")
    e.add_argument("run", nargs="?", help="run folder (config.json + checkpoints/)")
    e.add_argument("--nir", help="output .nir file (HDF5), written atomically")
    e.add_argument("--check", metavar="FILE", help="read a .nir file and say which importers (plif, Norse, snnTorch, "
                                                   "Sinabs) run it exactly, close, or not at all; exports nothing")
    e.add_argument("--which", help="checkpoint name under checkpoints/ or a .pt path [best]")
    e.add_argument("--no-verify", action="store_true",
                   help="skip re-importing the graph and comparing its outputs with the network as trained")
    e.add_argument("--for", dest="target", choices=[*TARGETS, ALL_TARGETS],
                   help="importer the file is for: sets dt to the one it takes (Norse: its own default 1e-3 where every "
                        "trained k has a float32 tau there, else 2**-10, exact, pass it to from_nir; snnTorch 1e-4 fixed; Sinabs and generic 1), written to metadata['dt'] with the "
                        "target, and refuses layers it would run differently from plif; no file runs in all of "
                        "them: 'all' writes one per importer, named after it (net.nir -> net.norse.nir, "
                        f"net.snntorch.nir, net.sinabs.nir, net.generic.nir) [{DEFAULT_TARGET}]")
    e.add_argument("--dt", type=float, default=None,
                   help="time-step the file assumes, instead of the target's; tau and the IF input gain are "
                        "scaled so an importer stepping with this dt reproduces plif (not with --for snntorch); "
                        "one at which a trained k has no float32 tau is refused unless --allow-inexact-dt")
    e.add_argument("--allow-inexact-dt", action="store_true",
                   help="export even where a trained k has no float32 tau at dt (a potential within ~1e-7 of "
                        "the threshold can then fire differently); the check says how many outputs change")
    e.add_argument("--bn", choices=BN_MODES,
                   help="exact: BatchNorm as its own node, computing what the trained network computes; fold: "
                        "merged into the conv before it (smaller, rounds differently: the check says how many "
                        "outputs change) [exact]")
    add_trust_flag(e)
    e.set_defaults(func=run_export)
