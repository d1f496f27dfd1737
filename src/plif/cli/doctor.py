"""``plif doctor``: one report of this machine to paste into an issue.

Every fused kernel of :data:`plif.kernel_table.KERNELS` and whether it loaded (the reason, once,
where not).  For the CPU and each CUDA device: which path each default takes (the neuron backend ``auto`` picks,
the fused block kernels, ``plif train``'s CUDA graph, compile and memory defaults, the GPU switches),
and whether every fused kernel equals its reference there, on the kernel grids of
:mod:`plif.kernels.check` and :mod:`plif.kernels.block_check` within a time budget (``--budget``,
a minute by default; ``--quick`` a few cases of each).  Then the versions (plif, Python, torch,
CUDA, cuDNN, Triton, the C++ compiler) and the compiled kernel cache, each library checked against
the size and hash recorded when it was built.  Exit status 1 when a kernel differs from its
reference or a cached library is damaged.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from dataclasses import replace

__all__ = ["register", "run_doctor", "report"]

QUICK_EVERY = 10  # --quick: every 10th case of the quick grids
NEURON_DTYPES = {"cpu": ("float32", "float64", "bfloat16"), "triton": ("float32", "bfloat16", "float16")}


def _versions() -> dict:
    import torch

    import plif
    from .. import __version__
    from ..kernels import cpu_build

    try:
        import triton
        triton_version = triton.__version__
    except Exception as e:  # noqa: BLE001  (a broken install raises more than ImportError)
        triton_version = f"not available ({type(e).__name__}: {e})"
    cxx = cpu_build._compiler()
    compiler = "none found (set CXX or install g++)"
    if cxx:
        try:
            first = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout.splitlines()
            compiler = f"{first[0] if first else '?'} [{cxx}]"
        except (OSError, subprocess.SubprocessError) as e:
            compiler = f"{cxx}: cannot run ({e})"
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {"plif": f"{__version__} ({os.path.dirname(plif.__file__)})",
            "python": platform.python_version(), "torch": torch.__version__,
            "cuda": f"build {torch.version.cuda}, cuDNN {cudnn}" if torch.version.cuda else "none (a CPU build)",
            "triton": triton_version, "compiler": compiler,
            "machine": f"{platform.system()} {platform.machine()}, {_cpu_model()}, {os.cpu_count()} CPU threads, "
                       f"torch uses {torch.get_num_threads()}"}


def _cpu_model() -> str:
    from ..kernels import cpu_build

    lines = [ln.split(":", 1)[1].strip() for ln in cpu_build._cpu_id().splitlines() if ln.startswith("model name")]
    return lines[0] if lines else platform.processor() or "CPU model unknown"


def _cache() -> dict:
    from ..kernels import cpu_build

    cpu_build.load_library()  # builds or rebuilds (one line) where needed, as the first network would
    loaded = cpu_build.loaded_library()
    libraries = [{"path": str(path), "bytes": path.stat().st_size if path.exists() else None,
                  "state": "ok" if damage is None else damage, "loaded": path == loaded, **_verdict(path, damage)}
                 for path, damage in cpu_build.cached_libraries().items()]
    return {"folder": str(cpu_build.cache_dir()), "libraries": libraries, "build_error": cpu_build.BUILD_ERROR}


def _verdict(library, damage: str | None) -> dict:
    """Whether a cached library is a problem, and how to remove it.  One without a size and hash
    record is an older plif's (or an interrupted build's): this plif builds and records its own
    beside it and never loads it, so it is a note.  A damaged one (size or hash not as built) is a
    problem: a disk or a process wrote over plif's cache."""
    from ..kernels import cpu_build

    if damage is None:
        return {"problem": False, "remedy": None}
    remove = f"rm -r '{library.parent}'"
    if damage == cpu_build.UNRECORDED:
        return {"problem": False, "remedy": f"never loaded by this plif; to free its space: {remove}"}
    return {"problem": True, "remedy": f"remove it with {remove} (plif builds what it loads again)"}


def _train_defaults(kind: str) -> list[str]:
    from ..train import TrainConfig
    from ..train.config import resolve_config
    from ..train.speed import resolve_speed

    lines = []
    for preset in ("cpu", "paper"):
        cfg, notes = resolve_speed(resolve_config(TrainConfig(dataset="fashion-mnist", preset=preset)), kind)
        lines.append(f"--preset {preset}: CUDA graph {'on' if cfg.cuda_graph else 'off'}, compile "
                     f"{'on' if cfg.compile else 'off'}, memory {cfg.memory}, {cfg.amp or 'fp32'}"
                     + (f" ({'; '.join(notes)})" if notes else ""))
    return lines


def _paths(device) -> dict:
    """The path each default takes on ``device``."""
    import torch

    from ..switches import changed
    from ..layers.fused_block import block_kernels
    from ..neurons import PLIF, NeuronConfig, select_backend

    dtypes = (torch.float32, torch.bfloat16) + ((torch.float64,) if device.type == "cpu" else (torch.float16,))
    neuron, blocks = {}, {}
    for dtype in dtypes:
        name = str(dtype).removeprefix("torch.")
        neuron[name] = select_backend(torch.zeros(2, 3, device=device, dtype=dtype), NeuronConfig())
        kernels = block_kernels(PLIF(), device, dtype)
        blocks[name] = kernels.name if kernels is not None else "composed layers"
    return {"neuron backend (auto)": neuron, "fused block (memory fused)": blocks,
            "plif train": _train_defaults(device.type), "gpu switches": changed() or "none on"}


def _grid(device, budget: float, quick: bool) -> list[dict]:
    """Each fused kernel that runs on ``device`` against its reference on its grid, within ``budget`` seconds."""
    import torch

    from .. import kernel_table
    from ..kernels import block_check, check, self_check

    name = "cpu" if device.type == "cpu" else "triton"
    todo = []
    if kernel_table.functions("neuron", name) is not None:
        cases = [replace(c, dtype=d) for d in NEURON_DTYPES[name] for c in check.case_grid(quick)]
        todo.append(("neuron", cases, lambda c: check.run_case(c, name, str(device))))
    if kernel_table.functions("block", name) is not None:
        *fns, supports = block_check.load_backend(name)
        cases = [c for c in block_check.block_grid(quick) if supports(device, getattr(torch, c.dtype))]
        todo.append(("block", cases, lambda c: block_check.run_block_case(
            c, *fns, device=str(device), g_y_tol=self_check.block_g_y_tol(name, getattr(torch, c.dtype)))))
    out = []
    for i, (family, cases, run) in enumerate(todo):
        cases = cases[::QUICK_EVERY] if quick else cases
        share, start, done, failed = budget / (len(todo) - i), time.perf_counter(), 0, []
        for case in cases:
            if time.perf_counter() - start > share:
                break
            r = run(case)
            done += 1
            if not r["ok"]:
                failed.append({k: v for k, v in r.items() if k != "ok"})
        elapsed = time.perf_counter() - start
        budget -= elapsed
        out.append({"kernel": f"{name} {family}", "device": str(device), "cases": len(cases), "ran": done,
                    "equal": done - len(failed), "failed": failed, "seconds": round(elapsed, 2),
                    "dtypes": sorted({c.dtype for c in cases})})
    return out


def report(budget: float = 60.0, quick: bool = False) -> dict:
    """Everything ``plif doctor`` prints, as a dict."""
    import torch

    from .. import kernel_table
    from ..kernels import self_check

    devices = [torch.device("cpu")] + [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    per_device = budget / len(devices)
    result = {"versions": _versions(), "cache": _cache(), "kernels": kernel_table.status(), "devices": []}
    for device in devices:
        about = "CPU" if device.type == "cpu" else (f"{torch.cuda.get_device_name(device)}, compute capability "
                                                     f"{'.'.join(map(str, torch.cuda.get_device_capability(device)))}")
        self_check.run_checks(device, [torch.float32, torch.bfloat16])  # Triton's first-use checks, as a run's
        result["devices"].append({"device": str(device), "about": about, "defaults": _paths(device),
                                  "checks": _grid(device, per_device, quick)})
    result["first_use_checks"] = self_check.results()
    return result


def _print(r: dict) -> None:
    print("plif doctor: paste this whole report into an issue")
    print("versions")
    for k, v in r["versions"].items():
        print(f"  {k:10s} {v}")
    c = r["cache"]
    print(f"kernel cache {c['folder']}")
    for lib in c["libraries"] or [{"path": "(no library built yet)", "state": "", "bytes": None, "loaded": False}]:
        size = f" ({lib['bytes'] / 1e6:.1f} MB)" if lib["bytes"] else ""
        print(f"  {lib['state'] or '-':4s} {lib['path']}{size}{' loaded' if lib['loaded'] else ''}")
        if lib.get("remedy"):
            print(f"       {'note' if not lib['problem'] else 'problem'}: {lib['remedy']}")
    if c["build_error"]:
        print(f"  the CPU kernels did not load: {c['build_error'].splitlines()[0]}; the PyTorch path runs")
    print("kernels (plif.kernel_table)")
    for k in r["kernels"]:
        print(f"  {k['kind']:6s} {k['name']:7s} for {k['device']:5s} {k['state']}")
    for d in r["devices"]:
        print(f"{d['device']} ({d['about']})")
        for k, v in d["defaults"].items():
            if isinstance(v, dict):
                v = ", ".join(f"{a}: {b}" for a, b in v.items())
            elif isinstance(v, list):
                v = "; ".join(v)
            print(f"  {k:27s} {v}")
        for ch in d["checks"]:
            stopped = "" if ch["ran"] == ch["cases"] else f", stopped after {ch['ran']} of {ch['cases']} (time budget)"
            print(f"  check {ch['kernel']:21s} {ch['equal']}/{ch['ran']} cases equal the reference "
                  f"({', '.join(ch['dtypes'])}; {ch['seconds']} s{stopped})")
            for f in ch["failed"]:
                worse = ", ".join(f"{k}={v:.3g}" for k, v in f.items() if isinstance(v, float) and k != "tol"
                                  and v > f["tol"])
                same = ", ".join(k for k, v in f.items() if v is False)
                print(f"    FAIL {f['case']}: {'; '.join(filter(None, [same and 'not equal: ' + same, worse]))}")
        if not d["checks"]:
            print("  check                       no fused kernel loads here: the PyTorch paths run")
    for ch in r["first_use_checks"]:
        if ch["dtype"] is None:
            continue  # a checked kernel that did not load: the kernels' lines above say why
        print(f"first-use check {ch['kernel']} {ch['device']} {ch['dtype']}: "
              f"{ {True: 'equal', False: 'differs', None: 'not checked'}[ch['equal']]}, runs {ch['runs']}")
    bad = _problems(r)
    print("verdict: " + ("; ".join(bad) if bad else "every kernel checked equals its reference, the cache is whole"))


def _problems(r: dict) -> list[str]:
    bad = [f"{ch['kernel']} on {ch['device']}: {len(ch['failed'])} case(s) differ"
           for d in r["devices"] for ch in d["checks"] if ch["failed"]]
    bad += [f"{ch['kernel']} {ch['dtype']} on {ch['device']} failed its first-use check"
            for ch in r["first_use_checks"] if ch["equal"] is False]
    bad += [f"{lib['path']} {lib['state']}" for lib in r["cache"]["libraries"] if lib["problem"]]
    return bad


def run_doctor(args) -> int:
    if args.budget <= 0:
        raise ValueError(f"--budget {args.budget:g}: must be a positive number of seconds")
    r = report(args.budget, args.quick)
    if args.json:
        print(json.dumps(r, default=str))
    else:
        _print(r)
    return 1 if _problems(r) else 0


def register(sub) -> None:
    p = sub.add_parser("doctor", help="report this machine for an issue: the path each default takes, every fused "
                                      "kernel checked against its reference, versions, the kernel cache")
    p.add_argument("--budget", type=float, default=60.0, help="seconds for the kernel checks, all devices [60]")
    p.add_argument("--quick", action="store_true", help=f"every {QUICK_EVERY}th case of the quick grids (seconds)")
    p.add_argument("--json", action="store_true", help="the report as one JSON object")
    p.set_defaults(func=run_doctor)
