"""A run's stored config: ``config.json``, or the copy ``checkpoints/last.pt`` keeps, read back in one place.

Every command that reads a run's config goes through :func:`read_run_config`: the format (a JSON
object holding at least the network, its input shape and T), what older runs wrote (``backend``
among the network's keywords, from before it left the network: dropped here, once), and the
surrogate the run names, made usable in this process by :func:`stored_surrogate` alone.  Whether
every value is one ``plif train`` accepts is training's to say: the CLI passes that check in
(``plif.train.config.check_stored``); this package knows nothing of training.

A run folder may come from someone else: the ``MODULE`` of a ``MODULE:NAME`` surrogate it names is
imported only when the user trusts it (``trust_modules``, the command line's ``--trust-module``, or
the environment's ``PLIF_TRUST_MODULES=mod1,mod2``), or when it is imported in this process already,
as ``torch.load(weights_only=True)`` runs no pickled code and Hugging Face's ``trust_remote_code``
is off by default.  Trusting a package trusts its submodules; a module is imported from the user's
environment, never the working directory.  A ``FILE.py:FACTORY`` model is trusted by the file's path
(``--trust-module /path/net.py``), never by its name: a ``net.py`` that arrives inside a run folder is
not the user's ``net``.  The run records the file's SHA-256 (``model_sha256``) and a file that changed
since is refused: the weights are those of the code it trained.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable, Iterable

from ..surrogate import Surrogate, get_surrogate, is_module_name
from .checkpoint import load_checkpoint
from .folder import RunFolder, read_json_file

__all__ = ["read_run_config", "read_config_json", "stored_surrogate", "stored_model", "trusted_modules", "is_file_path",
           "NETWORK_KEYS", "TRUST_ENV"]

TRUST_ENV = "PLIF_TRUST_MODULES"
"""The environment variable naming the modules (comma-separated) a run folder may make plif import."""

NETWORK_KEYS = ("network", "input_shape", "T")
"""What a stored config must hold to rebuild its network."""


def read_config_json(run) -> dict:
    """``config.json`` of run folder ``run`` as recorded: a JSON object, nothing else checked (reports
    read old and hand-written runs too).  Errors name the file (no run, bad JSON, not an object)."""
    folder = run if isinstance(run, RunFolder) else RunFolder(run)
    folder.require_run()
    d = read_json_file(folder.config, "run config")
    if not isinstance(d, dict):
        raise ValueError(f"{folder.config}: expected a JSON object, got {type(d).__name__}")
    return d


def read_run_config(run, check: Callable[[dict, str], object] | None = None, fallback: bool = False,
                    log: Callable[[str], None] | None = None, trust_modules: Iterable[str] = ()) -> dict:
    """The config of run folder ``run``, ready to rebuild its network; every error names the file.

    check: ``check(config, source)`` raising ``ValueError`` for a value the caller refuses (the CLI
    passes ``plif.train.config.check_stored``: only values ``plif train`` accepts).
    fallback: when ``config.json`` is missing or refused, the copy in ``checkpoints/last.pt`` (a
    resume rewrites config.json), if that copy passes the same; ``log`` then says so.  Otherwise, and
    when neither can be had, config.json's error stands.
    trust_modules: modules the run may name a surrogate from (:func:`stored_surrogate`), and model
    files (their paths) it may run (:func:`stored_model`).
    """
    folder = run if isinstance(run, RunFolder) else RunFolder(run)
    try:
        return _ready(read_config_json(folder), folder.config, check, trust_modules)
    except (OSError, ValueError) as e:
        last = folder.checkpoint("last")
        if not fallback or not folder.path.is_dir() or not last.is_file():
            raise
        try:  # the copy passes the same checks, or config.json's error stands (e.g. a surrogate's
            # module that cannot be imported here fails both: no "using the copy" before it)
            config = _ready(load_checkpoint(last)["config"], last, check, trust_modules)
        except (OSError, ValueError):
            raise e from None
        if log is not None:
            log(f"{e}; using the copy of the config in {last}")
        return config


def stored_surrogate(spec: str, source, trust_modules: Iterable[str] = ()) -> Surrogate:
    """The surrogate a stored config names, made usable in this process: a ``MODULE:NAME`` imports
    ``MODULE`` (which registers ``NAME``) when the user trusts it (``trust_modules`` or
    ``$PLIF_TRUST_MODULES``, :func:`trusted_modules`) and it is not imported already; otherwise it is
    refused, in one line naming the module and how to trust it.  The one place a run folder makes
    plif import code; errors name ``source``."""
    module, colon, _ = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    if colon and is_module_name(module) and module not in sys.modules and not _trusted(module, trust_modules):
        raise ValueError(f"{source}: surrogate {spec!r} names module {module!r}, which plif imports (running its "
                         f"code) only when you trust it: --trust-module {module}, or {TRUST_ENV}={module} "
                         f"(Python: trust_modules=[{module!r}])")
    try:
        return get_surrogate(spec, option="surrogate")
    except ValueError as e:
        raise ValueError(f"{source}: {e}") from None


def stored_model(ref, source, trust_modules: Iterable[str] = (), sha256: str | None = None) -> str:
    """The ``--model`` reference a stored config names (``plif train --model``), allowed to be imported
    here: a module's by the rule that covers a surrogate's module (trusted, ``trust_modules`` or
    ``$PLIF_TRUST_MODULES``, or imported already); a file's only when the user trusts that file by its
    path (or this process loaded it already), and when its content is the ``sha256`` the run recorded
    (if it did).  Otherwise refused in one line naming it and how to trust it.  Returns the
    reference; errors name ``source``."""
    from ..models.factories import model_file_sha256, model_module, parse_model_ref

    if not isinstance(ref, str):
        raise ValueError(f"{source}: model must be a string (FILE.py:FACTORY, package.module:FACTORY or a name), "
                         f"got {ref!r}")
    try:
        kind, where, _ = parse_model_ref(ref)
        module = model_module(ref)
    except ValueError as e:
        raise ValueError(f"{source}: {e}") from None
    if kind == "file":
        if not _file_trusted(where, trust_modules):
            raise ValueError(f"{source}: model {ref!r} runs the file {where}, which plif runs only when you trust that "
                             f"file by its path: --trust-module {where}, or {TRUST_ENV}={where} (Python: "
                             f"trust_modules=[{where!r}]){_why_not_trusted(where, module, source, trust_modules)}")
        have = model_file_sha256(ref)
        if sha256 is not None and have is not None and have != sha256:
            raise ValueError(f"{source}: model file {where} changed since the run was trained (SHA-256 {sha256[:12]}... "
                             f"recorded, {have[:12]}... now): its weights are for the code it trained with; put that "
                             "file back to use this run")
        return ref
    if module is not None and module not in sys.modules and not _trusted(module, trust_modules):
        raise ValueError(f"{source}: model {ref!r} names module {module!r}, which plif imports (running its code) "
                         f"only when you trust it: --trust-module {module}, or {TRUST_ENV}={module} "
                         f"(Python: trust_modules=[{module!r}])")
    return ref


def _file_trusted(path: str, trust_modules: Iterable[str]) -> bool:
    """Whether the user trusts the file ``path`` by its path, or this process loaded that very file already."""
    from ..models.factories import file_module_name

    real = os.path.realpath(path)
    loaded = getattr(sys.modules.get(file_module_name(path)), "__file__", None)
    return (loaded is not None and os.path.realpath(loaded) == real) or any(
        is_file_path(t) and os.path.realpath(os.path.expanduser(t)) == real for t in trusted_modules(trust_modules))


def _why_not_trusted(path: str, stem: str, source, trust_modules: Iterable[str]) -> str:
    """What the refusal of an untrusted model file adds: a module name trusted alike, a file inside the run."""
    notes = []
    if _trusted(stem, trust_modules):
        notes.append(f"the module name {stem!r} you trust does not trust a file of that name")
    run = Path(source).parent
    run = run.parent if run.name == "checkpoints" else run
    if Path(os.path.realpath(path)).is_relative_to(os.path.realpath(run)):
        notes.append("it lies inside the run folder: it came with the run")
    return f"; {'; '.join(notes)}" if notes else ""


def is_file_path(entry: str) -> bool:
    """Whether a trusted entry names a file (``net.py``, ``./nets/a.py``) rather than a module."""
    return isinstance(entry, str) and (entry.endswith(".py") or os.sep in entry)


def trusted_modules(trust_modules: Iterable[str] = ()) -> list[str]:
    """The modules a run folder may make plif import and the model files (``FILE.py`` paths) it may run:
    ``trust_modules`` and those ``$PLIF_TRUST_MODULES`` names (comma-separated); one that is neither a
    module name nor a ``.py`` path is refused, naming where it came from."""
    if isinstance(trust_modules, str):
        trust_modules = [trust_modules]
    given = [(name, "trust_modules") for name in trust_modules]
    given += [(name.strip(), TRUST_ENV) for name in os.environ.get(TRUST_ENV, "").split(",") if name.strip()]
    for name, where in given:
        if not (is_module_name(name) if not is_file_path(name) else name.endswith(".py")):
            raise ValueError(f"{where}: {name!r} is neither a module name (dotted Python identifiers, e.g. "
                             "mypackage.surrogates) nor a model file's path (FILE.py)")
    return [name for name, _ in given]


def _trusted(module: str, trust_modules: Iterable[str]) -> bool:
    """Whether module ``module`` is trusted, by its name or a package's (a file's path trusts no module)."""
    return any(module == t or module.startswith(t + ".") for t in trusted_modules(trust_modules)
               if not is_file_path(t))


def _ready(d, source: Path, check, trust_modules: Iterable[str] = ()) -> dict:
    """A stored config dict brought up to date and checked: the network's keys are there, its
    keywords an object without the legacy ``backend``, its surrogates usable, then ``check``."""
    if not isinstance(d, dict):
        raise ValueError(f"{source}: expected a JSON object, got {type(d).__name__}")
    for key in NETWORK_KEYS:
        if key not in d:
            raise ValueError(f"{source}: missing key {key!r} (a run config needs network, input_shape and T)")
    kwargs = d.get("network_kwargs", {})
    if not isinstance(kwargs, dict):
        raise ValueError(f"{source}: network_kwargs must be an object, got {kwargs!r}")
    if "backend" in kwargs:  # runs made before the backend left the network kept it among these keywords
        d = {**d, "network_kwargs": {k: v for k, v in kwargs.items() if k != "backend"}}
    for spec in dict.fromkeys((d.get("surrogate"), kwargs.get("surrogate"))):
        if isinstance(spec, str):  # another type: the check names it
            stored_surrogate(spec, source, trust_modules)
    if d.get("model") is not None:
        sha = d.get("model_sha256")
        stored_model(d["model"], source, trust_modules, sha if isinstance(sha, str) else None)
    if check is not None:
        check(d, str(source))
    return d
