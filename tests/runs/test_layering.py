"""Reading a run needs nothing of training: ``plif.runs``, ``plif.deploy`` and the experiments'
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
