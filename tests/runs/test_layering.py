"""The package's layers: no import runs back up (the dataset catalog and the GPU switches on the ground
floor), and reading a run needs nothing of training: ``plif.runs``, ``plif.deploy`` and the experiments'
run reader import no ``plif.train`` module, not even inside a function."""
import ast
from pathlib import Path

import pytest

import plif

SRC = Path(plif.__file__).parent
READERS = sorted([*(SRC / "runs").glob("*.py"), *(SRC / "deploy").glob("*.py"), SRC / "experiments" / "runs.py"])


def _imported(path: Path) -> set[str]:
    """Every module ``path`` imports, as an absolute dotted name."""
    package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            names.add(".".join(p for p in (base, node.module) if p))
    return names


@pytest.mark.parametrize("path", READERS, ids=lambda p: str(p.relative_to(SRC)))
def test_run_readers_import_nothing_of_training(path):
    assert not [n for n in _imported(path) if n == "plif.train" or n.startswith("plif.train.")]


def test_the_check_sees_a_relative_import_of_training():
    assert "plif.train.run" in _imported(SRC / "experiments" / "ablation.py")  # a function-level import


# The whole package in layers, lowest first (issue 48): a module imports only from layers below its own,
# or from its own package. The ground floor holds the facts and settings every layer may read: the
# dataset catalog and the GPU switches among them, so that models never reach into data for a fact,
# and the kernel table (names only), which the neuron dispatch below plif.kernels reads.
LAYERS = (
    {"_lazy", "atomic", "filelock", "device", "progress", "signals", "surrogate", "catalog", "switches", "values",
     "kernel_table"},
    {"neurons"}, {"kernels"}, {"layers", "encoding"}, {"models", "data"}, {"runs", "monitor", "interop"}, {"deploy", "train"},
    {"experiments", "bench"}, {"cli"}, {"__main__"},
)
RANK = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def _unit(module: str) -> str | None:
    """The top-level unit of ``plif`` a dotted module name belongs to (``plif.data.catalog`` -> ``data``)."""
    parts = module.split(".")
    return parts[1] if parts[0] == "plif" and len(parts) > 1 else None


def _upward(unit: str, imported: set[str]) -> list[str]:
    """What ``unit`` imports from its own layer (another package) or above; the ground floor may read itself."""
    here = RANK[unit]
    bad = []
    for name in sorted(imported):
        other = _unit(name)
        if other is None or other == unit or other not in RANK:  # plif itself, or a name in a unit
            continue
        if RANK[other] > here or (RANK[other] == here and here != 0):
            bad.append(name)
    return bad


def _imported_names(path: Path) -> set[str]:
    """:func:`_imported` plus each ``from X import name`` as ``X.name`` (``from .. import switches``)."""
    package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])
    names = _imported(path)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module) if p)
            names.update(f"{module}.{a.name}" for a in node.names)
    return names


SOURCES = sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_import_runs_back_up_the_layers(path):
    unit = path.relative_to(SRC).parts[0].removesuffix(".py")
    if unit == "__init__":
        return  # plif/__init__.py: lazy names only
    assert unit in RANK, f"{unit}: place it in LAYERS"
    assert _upward(unit, _imported_names(path)) == []


def test_the_facts_on_the_ground_floor_import_nothing_of_plif():
    for name in ("catalog.py", "switches.py", "kernel_table.py"):
        assert [n for n in _imported_names(SRC / name) if n == "plif" or n.startswith("plif.")] == [], name
    assert not (SRC / "data" / "catalog.py").exists() and not (SRC / "kernels" / "gpu_switches.py").exists()


def test_the_layer_check_sees_models_reaching_into_data_and_a_sibling():
    assert _upward("models", {"plif.data.catalog", "plif.catalog", "plif.kernels.layout"}) == ["plif.data.catalog"]
    assert _upward("deploy", {"plif.train.run", "plif.runs.folder"}) == ["plif.train.run"]
    assert _upward("catalog", {"plif._lazy"}) == [] and _upward("neurons", {"plif.kernels"}) == ["plif.kernels"]


def _module(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module in ``graph`` (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_two_modules_import_each_other():
    """Issue 48: nir_check <-> nir_import (rate_from_tau) and lowering <-> lowering_block (four private
    names) each became one shared module. A package's ``__init__`` (lazy re-exports) is left out."""
    modules = {_module(p): p for p in SOURCES if p.name != "__init__.py"}
    graph = {m: {n for n in _imported_names(p) if n in modules and n != m} for m, p in modules.items()}
    assert _circles(graph) == []


def test_the_circle_check_sees_a_circle_of_three():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
