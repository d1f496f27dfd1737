"""Build plif's API reference (HTML) from its docstrings with pdoc: ``python scripts/api_reference.py -o docs/api``.

It covers the public API: each package's ``__all__`` (:data:`MODULES`) and the leaf modules users
import by name (the surrogate registry, frame integration).  :data:`LEFT_OUT` says what it leaves
out and why.  The optional packages (:data:`OPTIONAL`) are hidden while it builds: covered modules
import them only inside the functions that use them, so the reference is the same with or without
the extras, and a covered module that needs one at import time fails the build by name.

The build fails (exit 1, one line per problem) on any warning pdoc gives, on a reST cross-reference
(``:func:`x```, ``:class:`x```, ...) that names no Python object, and on a public function or class
without a docstring.  ``tests/test_api_reference.py`` runs it in CI.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import html as html_module
import importlib
import inspect
import re
import sys
import warnings
from pathlib import Path

MODULES = ("plif", "plif.neurons", "plif.surrogate", "plif.layers", "plif.models", "plif.data", "plif.data.events",
           "plif.data.frames", "plif.data.tonic_frames", "plif.data.tonic_dataset",
           "plif.train", "plif.runs", "plif.deploy", "plif.experiments")
LEFT_OUT = {
    "plif.cli": "argument parsing only; `plif <command> --help` is its reference",
    "plif.kernels": "fused backends, reached through plif.neurons.multi_step and backend_status; "
                    "its Triton module imports triton at import time",
    "plif.bench": "the benchmarks behind `plif bench`; their tables are their output",
    "plif.atomic, plif.device, plif.progress": "internal helpers of the packages above",
    "plif.catalog": "the dataset records, shown where users reach them: plif.data (DATASETS, DatasetSpec, get_dataset)",
    "plif.switches": "the GPU speed candidates, set with $PLIF_GPU (docs/lab/gpu-candidates.md)",
    "plif.kernel_table": "the fused kernels' one table, loader and status: plif doctor prints it, "
                         "plif.neurons.backend_status shows its neuron kernels",
}
OPTIONAL = ("triton", "nir", "nirtorch", "aedat", "matplotlib", "tensorboard", "tonic", "snntorch", "norse", "sinabs")
HTML_TAGS = {"p", "code", "a", "pre", "div", "span", "table", "thead", "tbody", "tr", "th", "td", "ul", "ol", "li",
             "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "br", "hr", "sup", "sub"}
ROLE = re.compile(r"(?::py)?:(mod|func|data|const|class|meth|attr|exc|obj):`~?([^`]+)`")


@contextlib.contextmanager
def without(packages: tuple[str, ...]):
    """Make ``import p`` fail for each of ``packages`` (and their submodules) inside the block."""
    hidden = {name: mod for name, mod in sys.modules.items() if name.split(".")[0] in packages}
    for name in hidden:
        del sys.modules[name]
    sys.modules.update(dict.fromkeys(packages))
    try:
        yield
    finally:
        for name in packages:
            sys.modules.pop(name, None)
        sys.modules.update(hidden)


def resolve_lazy(name: str) -> None:
    """Put a package's lazily imported names (PEP 562) into its ``__dict__``, where pdoc reads members."""
    module = importlib.import_module(name)
    for member in getattr(module, "__all__", ()):
        if member not in vars(module):
            setattr(module, member, getattr(module, member))


def lookup(dotted: str) -> bool:
    """True if ``dotted`` names a module, or an attribute path inside one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True
    return False


def resolves(target: str, module: str, qualname: str, is_class: bool = False) -> bool:
    """True if a cross-reference written in ``module``'s object ``qualname`` names an object,
    read as pdoc links it: relative to the module (``.x``), in the module or class, or absolute."""
    name = target.removesuffix("()")
    if name.startswith("."):
        base = module if hasattr(sys.modules[module], "__path__") else module.rpartition(".")[0]
        while name.startswith(".."):
            name, base = name[1:], base.rpartition(".")[0]
        return lookup(base + name)
    scopes = qualname.split(".") if is_class else qualname.split(".")[:-1]
    return any(lookup(".".join([module, *scopes[:n], name])) for n in range(len(scopes), -1, -1)) or lookup(name)


def own_docstring(doc) -> str | None:
    """The docstring written in plif's source for ``doc``; None for an object that is not plif's or a
    method that shows its plif base class's docstring (checked where it is written)."""
    import pdoc.doc

    if not doc.taken_from[0].startswith("plif"):
        return None
    if isinstance(doc, pdoc.doc.Class):  # pdoc's own reading drops a dataclass's generated one
        raw = doc.obj.__dict__.get("__doc__") if doc.docstring else None
    elif isinstance(doc, pdoc.doc.Function):
        raw = getattr(doc.obj, "__doc__", None)
        if not raw and doc.docstring:
            return None
    else:
        return doc.docstring
    return inspect.cleandoc(raw) if raw else ""


def inherits_foreign_doc(doc) -> bool:
    """True for a plif method whose only docstring is torch's (``forward``: "Define the computation
    performed at every call"), which says nothing about plif's method."""
    import pdoc.doc

    if (not isinstance(doc, pdoc.doc.Function) or "." not in doc.taken_from[1]
            or getattr(doc.obj, "__doc__", None) or not doc.docstring):
        return False
    cls = sys.modules[doc.taken_from[0]]
    for part in doc.taken_from[1].split(".")[:-1]:
        cls = getattr(cls, part)
    origin = next((c for c in cls.__mro__[1:] if getattr(c.__dict__.get(doc.name), "__doc__", None)), None)
    return origin is not None and not origin.__module__.startswith("plif")


def field_help(cls) -> None:
    """Show each dataclass field's ``metadata["help"]`` (TrainConfig's: what ``plif train --help``
    prints) as its docstring where the source gives it none; it is plain text, so escaped for Markdown."""
    if not dataclasses.is_dataclass(cls.obj):
        return
    helps = {f.name: f.metadata.get("help") for f in dataclasses.fields(cls.obj)}
    for member in cls.own_members:
        if helps.get(member.name) and not member.docstring:
            member.__dict__["docstring"] = re.sub(r"([*_`\\])", r"\\\1", html_module.escape(helps[member.name], quote=False))


def reexported_docstring(doc) -> None:
    """Give a constant a package re-exports the docstring written where it is defined (pdoc reads a
    variable's docstring from the source of the module it is shown in)."""
    import pdoc.doc
    import pdoc.doc_ast

    if not isinstance(doc, pdoc.doc.Variable) or doc.docstring or "." in doc.qualname:
        return
    obj = getattr(sys.modules[doc.modulename], doc.name)
    for name, module in sorted(sys.modules.items()):
        if name.startswith("plif.") and vars(module).get(doc.name) is obj:
            text = pdoc.doc_ast.walk_tree(module).var_docstrings.get(doc.name)
            if text:
                doc.__dict__["docstring"] = text
                return


def markup_problems(html: str) -> list[str]:
    """What reads wrong in one rendered docstring: emphasis from a bare ``*``, raw HTML, reST that
    the Markdown renderer printed as text (``::``, ``:role:``, an unmatched backtick)."""
    problems = []
    if re.search(r"<(em|strong)>", html):
        problems.append("'*' outside backticks became emphasis")
    tags = set(re.findall(r"<([a-zA-Z][\w-]*)", html)) - HTML_TAGS - {"em", "strong"}
    problems += [f"raw HTML <{tag}> (put it in backticks)" for tag in sorted(tags)]
    for table in re.findall(r"<table>.*?</table>", html, flags=re.S):
        if len({len(re.findall(r"<t[hd][ >]", row)) for row in re.findall(r"<tr>.*?</tr>", table, flags=re.S)}) > 1:
            problems.append("a table row with more cells than its header (a '|' inside a cell)")
    if re.search(r":[a-z]+:<code>", html):
        problems.append("a reST role pdoc does not know")
    text = html_module.unescape(re.sub(r"<[^>]+>", "", re.sub(r"<(code|pre)>.*?</\1>", "", html, flags=re.S)))
    if re.search(r"::\s*$", text, re.M):
        problems.append("'::' printed as text (end the line with ':')")
    if "`" in text:
        problems.append("an unmatched backtick")
    return problems


def wrapped_literals(text: str) -> list[str]:
    """A ````literal```` that opens on one line of a docstring and closes on another: Markdown
    renderers disagree on it (markdown2 2.5.6 stopped pairing them), so it is refused whatever the
    installed renderer does.  Doctest lines and indented code are left out."""
    lines = [line for line in text.splitlines()
             if not line.lstrip().startswith((">>>", "...")) and not line.startswith("    ")]
    return [f"a ``literal`` wraps the line {line.strip()!r} (keep it on one line)"
            for line in lines if line.count("``") % 2]


def check(module) -> list[str]:
    """Problems in one pdoc module's docstrings: cross-references naming nothing, public objects
    without a docstring, bad markup.  Blanks the docstrings its methods only inherit from torch."""
    import pdoc.doc
    from pdoc.render_helpers import to_html, to_markdown

    docs = [module] + [d for d in module.members.values() if not d.name.startswith("_")]
    for cls in [d for d in docs if isinstance(d, pdoc.doc.Class)]:
        docs += [m for m in cls.own_members if not m.name.startswith("_") or m.name == "__init__"]
        field_help(cls)
    problems = []
    for doc in docs:
        reexported_docstring(doc)
        if inherits_foreign_doc(doc):
            doc.__dict__["docstring"] = ""  # pdoc's cached_property: what the page will show
        text = own_docstring(doc)
        if text is None:
            continue
        where = module.modulename + (f".{doc.qualname}" if doc is not module else "")
        field = isinstance(doc, pdoc.doc.Variable) and "." in doc.qualname  # an attribute: its class says
        if not text and not field and doc.name not in ("__init__", "forward", "extra_repr"):
            problems.append(f"{where}: no docstring")
        for _, target in ROLE.findall(text):
            if not resolves(target, doc.taken_from[0], doc.taken_from[1], isinstance(doc, pdoc.doc.Class)):
                problems.append(f"{where}: cross-reference {target!r} names nothing")
        problems += [f"{where}: {p}" for p in wrapped_literals(text)]
        html = to_html(to_markdown(text, module, "restructuredtext"))
        problems += [f"{where}: {p}" for p in markup_problems(html)]
    return problems


def warning_line(message) -> str:
    """One line for a warning pdoc gave: its first line and, for a traceback, the error it ends with."""
    lines = [line for line in str(message).splitlines() if line.strip()] or [""]
    return f"warning: {lines[0]}" + (f" {lines[-1].strip()}" if len(lines) > 1 else "")


def build(out: Path, modules: tuple[str, ...] = MODULES) -> list[str]:
    """Render the reference of ``modules`` into ``out``; return its problems (empty when it is clean)."""
    import pdoc
    import pdoc.doc
    import pdoc.render

    problems: list[str] = []
    with warnings.catch_warnings(record=True) as caught, without(OPTIONAL):
        warnings.simplefilter("always")
        for name in modules:
            try:
                resolve_lazy(name)
            except ImportError as e:
                problems.append(f"{name}: does not import without the optional packages ({e})")
        if problems:
            return problems
        for name in modules:  # the same (cached) Module objects that pdoc.pdoc renders
            problems += check(pdoc.doc.Module.from_name(name))
        pdoc.render.configure(docformat="restructuredtext", show_source=False, footer_text="plif API reference")
        pdoc.pdoc(*modules, output_directory=Path(out))
    return [warning_line(w.message) for w in caught] + problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, default=Path("docs/api"), help="output folder (default docs/api)")
    args = ap.parse_args(argv)
    problems = build(args.out)
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        print(f"api reference: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"api reference: {args.out / 'index.html'} ({len(MODULES)} modules; left out: {', '.join(LEFT_OUT)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
