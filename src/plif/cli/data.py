"""``plif data``: download and prepare datasets, turn one event file into frames, picture it, describe it."""
from __future__ import annotations

import json
import sys


def _sensor(text: str | None):
    if text is None:
        return None
    try:
        h, w = (int(v) for v in text.split(","))
    except ValueError:
        raise ValueError(f"--sensor must be H,W like 128,128, got {text!r}") from None
    if h < 1 or w < 1:
        raise ValueError(f"--sensor {text}: H and W must both be >= 1")
    return h, w


def _out_file(path: str) -> str:
    """``--out`` must be a new or a regular file: the atomic rename would replace a device node
    (``--out /dev/full``) or a folder's entry with a plain file."""
    from pathlib import Path

    p = Path(path)
    if p.exists() and not p.is_file():
        kind = "a directory" if p.is_dir() else "not a regular file (a device, pipe or socket)"
        raise ValueError(f"--out {path}: exists and is {kind}; give a file name")
    return path


def _warner(action: str, path: str):
    return lambda text: print(f"plif data {action}: warning: {path}: {text}", file=sys.stderr)


def _no_effect(spec, args) -> None:
    """Options of ``plif data prepare`` that would do nothing for the dataset ``spec``, refused."""
    if not spec.is_event:
        given = [flag for flag, on in (("--T", args.T is not None), ("--split", args.split is not None),
                                       ("--cache-dir", args.cache_dir is not None), ("--workers", args.workers is not None),
                                       ("--no-flip-x", not args.flip_x), ("--allow-empty", args.allow_empty),
                                       ("--verify", args.verify)) if on]
        if given:
            raise ValueError(f"{', '.join(given)}: no effect on {spec.name}, a static dataset (images, no frames and no "
                             "frame cache); these are for event datasets")
        return
    if args.no_download:
        raise ValueError(f"--no-download: no effect on {spec.name}, an event dataset: prepare never downloads one "
                         "(plif data download does)")
    if not args.flip_x and "flip_x" not in spec.reader_options:
        raise ValueError(f"--no-flip-x: no effect on {spec.name}, whose recordings are not jAER's AEDAT 2.0 "
                         "(it is for cifar10-dvs)")


def run_prepare(args) -> int:
    """Load each split the way training does (:func:`plif.data.pipeline.data_source`, the same default
    folder), so a prepared dataset is exactly what a run then reads."""
    from ..catalog import get_dataset
    from ..data.pipeline import LoadOptions, data_source

    spec = get_dataset(args.dataset)
    _no_effect(spec, args)
    if args.T is not None and args.T < 1:
        raise ValueError(f"--T must be >= 1, got {args.T}")
    if args.workers is not None and args.workers < 0:
        raise ValueError(f"--workers must be >= 0 (0: build in this process), got {args.workers}")
    slicing = {"slicing": args.split} if args.split else {}  # left out: LoadOptions' default, as training reads
    options = LoadOptions(download=not args.no_download, cache_dir=args.cache_dir,
                          workers=args.workers, progress=not args.quiet, allow_empty=args.allow_empty, verify=args.verify,
                          hash_sources=True,
                          reader={} if args.flip_x else {"flip_x": False}, **slicing)
    source = data_source(spec, args.data_dir, spec.T if args.T is None else args.T, options)
    for train in [s for s, skip in ((True, args.test_only), (False, args.train_only)) if not skip]:
        split = source.load(train)
        where = f" -> {split.origin}" if split.origin else ""
        print(f"{args.dataset} {'train' if train else 'test'}: samples {tuple(split.x.shape)} "
              f"{str(split.x.dtype).removeprefix('torch.')}, labels {tuple(split.y.shape)}{where}")
    return 0


def run_download(args) -> int:
    from ..catalog import get_dataset

    spec = get_dataset(args.dataset)
    if not spec.is_event:
        from ..data.static import load_static

        if args.keep_archives:
            raise ValueError(f"--keep-archives: no effect on {args.dataset}, whose files are kept as downloaded "
                             "(there is no archive to unpack)")

        for train in (True, False):
            x, _ = load_static(spec, args.data_dir, train=train, download=True)
            print(f"{args.dataset} {'train' if train else 'test'}: {len(x)} images")
        return 0
    from ..data.event_download import download_event_dataset

    download_event_dataset(spec, args.data_dir, keep_archives=args.keep_archives,
                           progress=False if args.quiet else None)
    return 0


def run_frames(args) -> int:
    from ..atomic import atomic_save_npy
    from ..data.events.file import file_to_frames

    _out_file(args.out)
    frames = file_to_frames(args.file, args.T, args.split, _sensor(args.sensor), args.flip_x, args.start, args.end,
                            args.allow_empty, warn=_warner("frames", args.file))
    try:
        atomic_save_npy(args.out, frames)
    except OSError as e:  # a full disk says which file it could not write
        if e.filename is not None:
            raise
        raise OSError(e.errno, e.strerror, args.out) from None
    print(f"{args.file}: frames {tuple(frames.shape)} float32, {int(frames.sum())} events -> {args.out}")
    return 0


def run_show(args) -> int:
    from ..data.events.file import file_to_frames
    from ..data.preview import save_frames_grid

    _out_file(args.out)
    frames = file_to_frames(args.file, args.T, args.split, _sensor(args.sensor), args.flip_x, args.start, args.end,
                            args.allow_empty, warn=_warner("show", args.file))
    try:
        save_frames_grid(frames, args.out, title=f"{args.file} (T={args.T}, split={args.split}; red ON, blue OFF)")
    except OSError as e:
        if e.filename is not None:
            raise
        raise OSError(e.errno, e.strerror, args.out) from None
    print(f"{args.out}: {args.T} frames of {frames.shape[2]}x{frames.shape[3]}")
    return 0


def run_info(args) -> int:
    from ..data.events.detect import event_info

    info = event_info(args.file, _sensor(args.sensor))
    for w in info.get("warnings", []):
        print(f"plif data info: warning: {args.file}: {w}", file=sys.stderr)
    if args.json:
        print(json.dumps(info))
        return 0
    sensor = info.get("sensor_size")
    print(f"file:        {info['path']}")
    print(f"format:      {info['format']}")
    print(f"events:      {info['events']}")
    print(f"duration:    {info['duration_us']} us ({info['duration_us'] / 1e6:.3f} s)")
    print(f"sensor size: {'x'.join(map(str, sensor)) + ' (H x W)' if sensor else 'unknown'}")
    labels = {"t_first_us": "first event", "t_last_us": "last event", "observed_size": "events span",
              "on_fraction": "ON fraction"}
    for key, label in labels.items():
        value = info.get(key)
        if value is None:
            continue
        if key == "observed_size":
            value = "x".join(map(str, value)) + " (max y+1 x max x+1)"
        elif key == "on_fraction":
            value = f"{value:.3f}"
        else:
            value = f"{value} us"
        print(f"{label + ':':13s}{value}")
    return 0


def run_verify(args) -> int:
    from pathlib import Path

    from ..data.events.cache import CacheError, check_cache
    from ..data.events.clean import cache_like_folders
    from ..catalog import default_root

    folders = [Path(f) for f in args.folders]
    if folders and args.cache_dir:
        raise ValueError("--cache-dir has no effect when cache folders are named: it says where every cache is "
                         "(give one or the other)")
    if not folders:
        base = Path(args.cache_dir) if args.cache_dir else default_root() / "frames"
        folders = cache_like_folders(base)  # finished or not: a cache without meta.json is reported
        if not folders:
            print(f"no frame caches under {base}")
            return 0
    bad = 0
    for folder in folders:
        try:
            meta = check_cache(folder, deep=True, sources=not args.no_sources)
            print(f"ok     {folder}: {meta['samples']} samples, T={meta['T']}, {len(meta['sources'])} recordings")
        except CacheError as e:
            bad += 1
            print(f"plif data verify: error: {e}", file=sys.stderr)
    return 1 if bad else 0


def run_clean(args) -> int:
    from pathlib import Path

    from ..catalog import default_root
    from ..data.events.clean import cache_folders, older_caches, remove_cache
    from ..data.memory import format_bytes

    base = Path(args.cache_dir) if args.cache_dir else default_root() / "frames"
    if not base.is_dir():
        raise FileNotFoundError(f"{base}: no such cache folder (--cache-dir)")
    if args.dataset:
        from ..catalog import get_dataset

        if not get_dataset(args.dataset).is_event:  # an unknown name: the valid ones
            raise ValueError(f"--dataset {args.dataset}: a static dataset, which has no frame caches")
    chosen = cache_folders(base) if args.all else older_caches(base)
    if args.dataset:
        chosen = [c for c in chosen if c.group[0] == args.dataset]
    freed = 0
    for c in chosen:
        why = "unfinished" if not c.finished else "older" if not args.all else "cache"
        if args.dry_run:
            print(f"would remove {why} {c.path} ({format_bytes(c.nbytes)})")
        elif remove_cache(c):
            freed += c.nbytes
            print(f"removed {why} {c.path} ({format_bytes(c.nbytes)})")
        else:
            print(f"skipped {c.path}: being built now", file=sys.stderr)
    if not chosen:
        print(f"nothing to remove under {base}")
    elif not args.dry_run:
        print(f"freed {format_bytes(freed)}")
    return 0


def _file_args(p) -> None:
    p.add_argument("file", help="event file (N-MNIST .bin, AEDAT 2.0 / 3.1 / 4.0; detected by content)")
    p.add_argument("--T", type=int, required=True, help="number of frames")
    p.add_argument("--split", choices=["count", "time"], default="count", help="equal event counts (paper) or equal durations")
    p.add_argument("--sensor", help="H,W (default: what the format / header states)")
    p.add_argument("--no-flip-x", dest="flip_x", action="store_false", help="AEDAT 2.0: keep jAER's raw x (no 127 - x)")
    p.add_argument("--start", type=int, help="only events with t >= START (us)")
    p.add_argument("--end", type=int, help="only events with t < END (us)")
    p.add_argument("--allow-empty", action="store_true",
                   help="write all-zero frames for a recording (or cut) without events (default: refuse)")


def register(sub) -> None:
    from ..catalog import DATASETS
    from ..data.event_download import download_help

    data = sub.add_parser("data", help="datasets: prepare caches, frames / picture / info of one event file")
    dsub = data.add_subparsers(dest="data_command", metavar="ACTION", required=True)

    p = dsub.add_parser("prepare", help="load a static dataset, or build the frame cache of an event dataset")
    p.add_argument("dataset", help=", ".join(DATASETS))
    p.add_argument("--data-dir", "--root", dest="data_dir",  # --root: its older name, kept
                   help="folder holding the raw files, as for plif train [$PLIF_DATA_ROOT; event datasets: "
                        "$PLIF_DATA_ROOT/<dataset>]")
    p.add_argument("--T", type=int, help="frames per sample (default: the paper's T of the dataset)")
    p.add_argument("--split", choices=["count", "time"], help="how events are sliced [count]")
    p.add_argument("--cache-dir", help="where frame caches go [$PLIF_DATA_ROOT/frames]")
    p.add_argument("--workers", type=int, help="processes for the cache build (0: none) [all CPUs]")
    p.add_argument("--no-flip-x", dest="flip_x", action="store_false", help="CIFAR10-DVS: keep jAER's raw x")
    p.add_argument("--no-download", action="store_true", help="static datasets: never try the network")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--train-only", action="store_true")
    g.add_argument("--test-only", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--allow-empty", action="store_true",
                   help="keep recordings without events as all-zero samples (default: refuse them)")
    p.add_argument("--verify", action="store_true",
                   help="event datasets: hash the frames too before reusing a cache (prepare always hashes every "
                        "recording; a training load hashes each one's first and last 64 KiB)")
    p.set_defaults(func=run_prepare)

    d = dsub.add_parser("download", help=f"fetch, check (md5) and unpack a dataset (event datasets: {download_help()}, "
                                         "then unpacks the archive you fetched)")
    d.add_argument("dataset", help=", ".join(DATASETS))
    d.add_argument("--data-dir", "--root", dest="data_dir",  # --root: its older name, kept
                   help="the dataset's folder, as for plif train [$PLIF_DATA_ROOT/<dataset>; static: $PLIF_DATA_ROOT]")
    d.add_argument("--keep-archives", action="store_true", help="keep the zip / tar files after unpacking")
    d.add_argument("--quiet", action="store_true", help="no progress bar")
    d.set_defaults(func=run_download)

    v = dsub.add_parser("verify", help="check frame caches: structure, checksums, recordings unchanged")
    v.add_argument("folders", nargs="*", help="cache folders [every cache under --cache-dir]")
    v.add_argument("--cache-dir", help="where frame caches are [$PLIF_DATA_ROOT/frames]")
    v.add_argument("--no-sources", action="store_true", help="do not check the recordings, only the cache files")
    v.set_defaults(func=run_verify)

    c = dsub.add_parser("clean", help="remove older frame caches (all but the newest of each dataset, split, T and "
                                      "slicing) and unfinished builds")
    c.add_argument("--cache-dir", help="where frame caches are [$PLIF_DATA_ROOT/frames]")
    c.add_argument("--dataset", help="only caches of this dataset")
    c.add_argument("--all", action="store_true", help="remove every frame cache, the newest too")
    c.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    c.set_defaults(func=run_clean)

    f = dsub.add_parser("frames", help="integrate one event file into frames [T, 2, H, W] saved as .npy")
    _file_args(f)
    f.add_argument("--out", required=True, help="output .npy (written atomically)")
    f.set_defaults(func=run_frames)

    s = dsub.add_parser("show", help="save a PNG grid of one file's frames (red ON, blue OFF)")
    _file_args(s)
    s.add_argument("--out", required=True, help="output .png")
    s.set_defaults(func=run_show)

    i = dsub.add_parser("info", help="format, event count, duration and sensor size of one event file")
    i.add_argument("file")
    i.add_argument("--sensor", help="H,W: check the events against this size instead of the stated one")
    i.add_argument("--json", action="store_true", help="one JSON object instead of text")
    i.set_defaults(func=run_info)
