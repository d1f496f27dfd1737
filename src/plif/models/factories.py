"""Networks written as ``nn.Module`` code, by reference: what ``plif train --model`` trains.

A reference is ``FILE.py:FACTORY`` (a Python file), ``package.module:FACTORY`` (an importable
module) or ``NAME``, a factory registered in :data:`MODEL_FACTORIES` (the residual zoo entries, for
instance).  A factory takes those of ``input_shape``, ``num_classes`` and ``T`` it names (or all
three through ``**kwargs``) and returns an ``nn.Module`` that maps ``[T, B, ...]`` to
``[T, B, num_classes]``: its signature is read, so ``def net(num_classes): ...`` is a factory.

Every way a reference can fail (a file or module that does not import, no such attribute, a factory
that raises or returns no module, an output of another shape) raises ``ValueError`` in one line
naming the reference and what was wrong (:class:`ModelError`).
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import inspect
import itertools
import os
import re
import sys
from pathlib import Path
from typing import Callable

__all__ = ["MODEL_FACTORIES", "register_model", "ModelError", "parse_model_ref", "model_module", "model_trust",
           "model_file_sha256", "file_module_name", "load_factory", "build_model", "check_model_output",
           "spikingjelly_neurons", "unconverted", "FACTORY_ARGS"]

MODEL_FACTORIES: dict[str, "Callable | str"] = {}
"""name -> factory (a callable, or ``"package.module:FACTORY"`` imported only when that name is
asked for, so the table costs no import): what ``--model NAME`` trains."""

FACTORY_ARGS = ("input_shape", "num_classes", "T")
"""What plif passes a factory, those of them its signature names."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class ModelError(ValueError):
    """A ``--model`` reference that cannot be trained, in one line naming it."""

# plif's residual zoo (plif.models.residual.RESIDUAL_ZOO): each factory named as its entry, "_" for "-"
MODEL_FACTORIES.update({name: f"plif.models.residual:{name.replace('-', '_')}" for name in (
    "sew-resnet18", "sew-resnet18-and", "sew-resnet18-iand", "sew-resnet34", "sew-resnet34-and", "sew-resnet34-iand",
    "spiking-resnet18", "spiking-resnet34", "sew-7b-net", "sew-wide-7b-net")})
MODEL_FACTORIES["spikformer"] = "plif.models.spikformer:spikformer"  # plif.models.spikformer.TRANSFORMER_ZOO


def register_model(name: str, factory: "Callable | str | None" = None):
    """Register ``factory`` under ``name`` (usable as a decorator: ``@register_model("sew-resnet18")``).
    A name taken already is refused (one name, one network)."""
    def add(f):
        if name in MODEL_FACTORIES and MODEL_FACTORIES[name] is not f:
            raise ValueError(f"model name {name!r} is registered already ({MODEL_FACTORIES[name]!r})")
        MODEL_FACTORIES[name] = f
        return f

    return add if factory is None else add(factory)


def parse_model_ref(ref: str) -> tuple[str, str, str]:
    """``(kind, where, attribute)`` of a reference: ``("file", "/abs/net.py", "make")``,
    ``("module", "pkg.nets", "make")`` or ``("name", "sew-resnet18", "")``.  A file's path is made
    absolute (a run's config.json records it so, for a resume from elsewhere)."""
    if not isinstance(ref, str) or not ref.strip():
        raise ModelError(f"--model {ref!r}: expected FILE.py:FACTORY, package.module:FACTORY or a registered name")
    where, colon, attr = ref.rpartition(":")
    if not colon:
        if ref not in MODEL_FACTORIES:
            known = ", ".join(sorted(MODEL_FACTORIES)) or "none registered"
            raise ModelError(f"--model {ref}: not a registered model name (known: {known}); give FILE.py:FACTORY "
                             "or package.module:FACTORY")
        return "name", ref, ""
    if not attr.isidentifier():
        raise ModelError(f"--model {ref}: {attr!r} is not a Python name (FACTORY is the function or class to call)")
    if where.endswith(".py"):
        return "file", os.path.abspath(os.path.expanduser(where)), attr
    if not _NAME.match(where):
        raise ModelError(f"--model {ref}: {where!r} is neither a .py file nor a module name (package.module)")
    return "module", where, attr


def model_module(ref: str) -> str | None:
    """The module a reference makes plif import, as ``--trust-module`` names it: the module of
    ``package.module:FACTORY``, the file name without ``.py`` of ``FILE.py:FACTORY`` (the name it is
    imported as); None for a registered name (the registry is code running already: plif's zoo, or
    what this process registered)."""
    kind, where, _ = parse_model_ref(ref)
    if kind == "file":
        return Path(where).stem
    return where if kind == "module" else None


def model_trust(ref: str) -> str | None:
    """What trusts ``ref`` (``--trust-module``): the module of ``package.module:FACTORY``, the absolute
    path of ``FILE.py:FACTORY`` (a file is trusted by its path, never by its name: a file of the same
    name arriving with a run folder is another file), None for a registered name."""
    kind, where, _ = parse_model_ref(ref)
    return None if kind == "name" else where


def model_file_sha256(ref: str | None) -> str | None:
    """The SHA-256 of the file ``FILE.py:FACTORY`` runs (a run records it, :func:`plif.runs.stored_model`
    checks it), None for a module or a registered name, a file that cannot be read, or no reference
    (a network in the paper's notation)."""
    if ref is None:
        return None
    kind, where, _ = parse_model_ref(ref)
    if kind != "file":
        return None
    try:
        return hashlib.sha256(Path(where).read_bytes()).hexdigest()
    except OSError:
        return None


def file_module_name(path) -> str:
    """The name under ``sys.modules`` of the module a ``FILE.py:FACTORY`` reference loads from ``path``."""
    return f"plif_user_model_{re.sub(r'[^0-9A-Za-z_]', '_', Path(path).stem)}"


def load_factory(ref: str) -> Callable:
    """The factory a reference names, its file or module imported."""
    kind, where, attr = parse_model_ref(ref)
    if kind == "name":
        entry = MODEL_FACTORIES[where]
        if callable(entry):
            return entry
        kind, where, attr = parse_model_ref(entry)
    if kind == "file":
        if not os.path.isfile(where):
            raise ModelError(f"--model {ref}: {where}: no such file")
        module_name = file_module_name(where)
        spec = importlib.util.spec_from_file_location(module_name, where)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module  # dataclasses and torch.compile look a class's module up there
        try:
            spec.loader.exec_module(module)
        except (Exception, SystemExit) as e:
            del sys.modules[module_name]
            raise ModelError(f"--model {ref}: importing {where} {_failed(e, 'failed:')}") from None
    else:
        from ..surrogate import import_outside_cwd

        try:  # as a surrogate's MODULE: a module.py lying in the working directory is not what the user chose
            module = import_outside_cwd(where)
        except (Exception, SystemExit) as e:
            raise ModelError(f"--model {ref}: importing module {where} {_failed(e, 'failed:')}") from None
    factory = getattr(module, attr, None)
    if factory is None:
        raise ModelError(f"--model {ref}: {where} has no attribute {attr!r}")
    if not callable(factory):
        raise ModelError(f"--model {ref}: {attr} in {where} is a {type(factory).__name__}, not a function or class")
    return factory


def build_model(ref: str, input_shape, num_classes: int, T: int, backend: str = "auto", option: str = "backend",
                seed: int | None = None):
    """Call the factory of ``ref`` with those of ``input_shape``, ``num_classes`` and ``T`` it takes;
    the module it returns, its neurons set to ``backend`` (``option`` names it in an error), not yet
    checked against the data (:func:`check_model_output`).

    The file or module is imported and the factory called before any kernel is built (the layers it
    makes load theirs after it returns: a factory that raises is said first, not after a compile of
    minutes), and a factory that ends the process (``sys.exit``) is refused like one that raises.
    ``seed``: torch's generator is seeded with it first, and a reseed inside (``torch.manual_seed(s)``,
    ``torch.seed()``) is made from ``seed`` and ``s``, so a factory that seeds its own initialisation
    stays repeatable and two seeds still give two networks."""
    import torch

    from ..kernel_table import deferred
    from ..layers.fused_block import load_kernels
    from ..neurons.dispatch import check_backend, load_backends
    from .names import neurons

    with deferred(), _seeded(seed):
        model = _call_factory(ref, input_shape, num_classes, T)
    load_backends()  # now, outside any torch.compile trace, as the layers would have as they were built
    load_kernels()
    if not isinstance(model, torch.nn.Module):
        raise ModelError(f"--model {ref}: the factory returned a {type(model).__name__}, not a torch.nn.Module")
    if (why := unconverted(model, f"--model {ref}: the factory's network",
                           "make the factory return plif.from_spikingjelly(model)")) is not None:
        raise ModelError(why)
    for m in neurons(model).values():  # how the neurons run here: not part of the network
        check_backend(backend, surrogate=m.cfg.surrogate, option=option)
        m.backend = backend
    return model


def _call_factory(ref: str, input_shape, num_classes: int, T: int):
    """What the factory of ``ref`` returns, called with those of ``input_shape``, ``num_classes`` and ``T`` it takes."""
    factory = load_factory(ref)
    given = {"input_shape": tuple(input_shape), "num_classes": int(num_classes), "T": int(T)}
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: called with nothing
        params = ()
    takes_all = any(p.kind is p.VAR_KEYWORD for p in params)
    kwargs = {name: value for name, value in given.items() if takes_all or any(p.name == name for p in params)}
    missing = [p.name for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
               and p.name not in kwargs]
    if missing:
        raise ModelError(f"--model {ref}: the factory needs {', '.join(map(repr, missing))}, which plif cannot give "
                         f"(it passes {', '.join(FACTORY_ARGS)}: give the others defaults)")
    try:
        return factory(**kwargs)
    except (Exception, SystemExit) as e:
        raise ModelError(f"--model {ref}: the factory {_failed(e)}") from None


@contextlib.contextmanager
def _seeded(seed: int | None):
    """torch's global generator seeded with ``seed`` (nothing done for None), and within, torch's
    reseeding functions made to derive their seed from ``seed`` (:func:`build_model`)."""
    if seed is None:
        yield
        return
    import torch

    real = {(mod, name): getattr(mod, name) for mod in (torch, torch.random) for name in ("manual_seed", "seed")}
    manual_seed = real[(torch.random, "manual_seed")]
    active, reseeds = [True], itertools.count()

    def derived_manual_seed(s):
        return manual_seed(_derived_seed(seed, int(s)) if active[0] else s)

    def derived_seed():  # torch.seed(): a fresh seed every call, here a fresh one of plif's
        if not active[0]:
            return real[(torch.random, "seed")]()
        s = _derived_seed(seed, f"seed {next(reseeds)}")
        manual_seed(s)
        return s

    manual_seed(seed)
    for mod, name in real:
        setattr(mod, name, derived_manual_seed if name == "manual_seed" else derived_seed)
    try:
        yield
    finally:  # a module that bound the names as it was imported keeps a plain seed from now on
        active[0] = False
        for (mod, name), f in real.items():
            setattr(mod, name, f)


def _derived_seed(seed: int, s) -> int:
    """A 64-bit seed made of plif's ``seed`` and the one a factory asked for."""
    return int.from_bytes(hashlib.sha256(f"{seed}/{s}".encode()).digest()[:8], "little")


def spikingjelly_neurons(model) -> dict:
    """``{qualified name: neuron}`` of every SpikingJelly neuron (a ``BaseNode``) of ``model``, found
    without importing SpikingJelly: a model that still needs ``plif.from_spikingjelly``."""
    return {name: m for name, m in model.named_modules()
            if any(c.__name__ == "BaseNode" and c.__module__.startswith("spikingjelly.") for c in type(m).__mro__)}


def unconverted(model, who: str, remedy: str = "convert it first with plif.from_spikingjelly(model)") -> str | None:
    """The one line saying that ``model`` holds SpikingJelly neurons (``who`` opens it, ``remedy`` ends
    it), or None when it holds none."""
    found = spikingjelly_neurons(model)
    if not found:
        return None
    name, m = next(iter(found.items()))
    return (f"{who} is a SpikingJelly model ({type(m).__name__} at {name or '<model>'!r}, {len(found)} SpikingJelly "
            f"neuron(s)): {remedy}")


def check_model_output(model, ref: str, x, num_classes: int) -> None:
    """Run ``model`` on ``x`` (``[T, B, ...]``, the dataset's input) without gradients and refuse,
    naming ``ref``, an error or an output that is not ``[T, B, num_classes]``."""
    import torch

    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model(x)
    except (Exception, SystemExit) as e:
        raise ModelError(f"--model {ref}: its forward on the dataset's input {list(x.shape)} ([T, B, ...]) "
                         f"{_failed(e)}") from None
    finally:
        model.train(was_training)
    want = (x.shape[0], x.shape[1], num_classes)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != want:
        got = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ModelError(f"--model {ref}: its output for the dataset's input {list(x.shape)} is {got}, not "
                         f"[T, B, classes] = {list(want)}")


def _failed(e: BaseException, verb: str = "raised") -> str:
    """What user code did instead of returning: ``raised TypeError: ...`` (``verb``), ``called sys.exit(3)``."""
    if isinstance(e, SystemExit):
        return f"called sys.exit({e.code!r})"
    return f"{verb} {_one_line(e)}"


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or "(no message)"
    return f"{type(e).__name__}: {text[:300]}"
