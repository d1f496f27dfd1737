"""docs/guarantees.md names the tests that prove each guarantee: every one it names must exist, and
every guarantee must name one, so the page cannot rot when a test is renamed or removed."""
import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "guarantees.md"
NAMED = re.compile(r"\b(tests/[\w/]+\.py)(?:::(\w+))?")


def defined_tests(path: Path) -> set[str]:
    """The test functions of a module, at its top level or in its classes."""
    tree = ast.parse(path.read_text(), str(path))
    names = set()
    for node in tree.body:
        bodies = node.body if isinstance(node, ast.ClassDef) else [node]
        names |= {f.name for f in bodies if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return names


def missing(text: str) -> list[str]:
    """What ``text`` names that is not in the checkout: a file, or a test in a file."""
    gone = []
    for file, test in NAMED.findall(text):
        path = REPO / file
        if not path.is_file():
            gone.append(file)
        elif test and test not in defined_tests(path):
            gone.append(f"{file}::{test}")
    return gone


def sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_every_test_the_page_names_exists():
    assert missing(DOC.read_text()) == []


def test_every_guarantee_names_a_test():
    found = sections(DOC.read_text())
    assert len(found) >= 8
    for title, body in found.items():
        assert any(test for _, test in NAMED.findall(body)), f"'{title}' names no test"


def test_the_check_sees_a_renamed_test_and_a_removed_file():
    real = "tests/test_filelock.py::test_a_link_in_place_of_the_lock_is_refused"
    assert missing(real) == []
    assert missing(real + "_renamed") == [real + "_renamed"]
    assert missing("tests/no_such_file.py::test_x") == ["tests/no_such_file.py"]
