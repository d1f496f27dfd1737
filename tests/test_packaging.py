"""plif installs like a library (issue 40): its wheel holds every file plif opens at run time and
nothing else of the checkout; its sdist is the source tree, which builds that wheel and runs these tests.

The slow tests build both once, from a copy of the checkout's files, the way ``python -m build`` does
(the sdist, then the wheel from the unpacked sdist), offline: setuptools' own build hooks, no build
isolation.  ``scripts/check_wheel.sh`` goes further than the suite can: a fresh virtualenv, ``pip install``
of the wheel, the CPU kernel compiled from the installed sources, and ``plif train`` on Fashion-MNIST.
"""
import ast
import fnmatch
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import plif
from plif.kernels import cpu_build

tomllib = pytest.importorskip("tomllib", reason="tomllib is Python >= 3.11")

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "plif"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
# files of the checkout an sdist leaves out: CI's entry point and git's own
NOT_IN_SDIST = {".ci/run", ".gitignore"}
# every module that reads a file by its own path (``__file__``), and the files it reads
OPENED_BY_PATH = {"plif/kernels/cpu_build.py": cpu_build.SOURCES + cpu_build.HEADERS}


def _package_data_globs(path: Path) -> list[str]:
    """The ``[tool.setuptools.package-data]`` patterns of the package holding ``path``."""
    package = ".".join(path.parent.relative_to(PACKAGE.parent).parts)
    return PYPROJECT["tool"]["setuptools"].get("package-data", {}).get(package, [])


def test_every_file_plif_opens_by_its_own_path_ships_with_it():
    """The C++ sources the CPU kernel compiles on first use are the only files plif reads beside its
    modules: found by path inside the package, declared package data, so that a wheel carries them."""
    users = set()
    for p in PACKAGE.rglob("*.py"):
        tree = ast.parse(p.read_text(), str(p))
        if any(isinstance(n, ast.Name) and n.id == "__file__" for n in ast.walk(tree)):
            users.add(p.relative_to(PACKAGE.parent).as_posix())
        text = p.read_text()
        assert "importlib.resources" not in text and "get_data(" not in text, f"{p}: add what it reads to OPENED_BY_PATH"
    assert users == set(OPENED_BY_PATH), "a module reads a file by its own path: add it and its files to OPENED_BY_PATH"
    for files in OPENED_BY_PATH.values():
        for f in files:
            assert f.is_file() and f.resolve().is_relative_to(PACKAGE), f
    others = [p for p in PACKAGE.rglob("*") if p.is_file() and p.suffix != ".py" and "__pycache__" not in p.parts]
    assert {p.name for p in others} >= {f.name for files in OPENED_BY_PATH.values() for f in files}
    for p in others:  # every non-Python file of the package is package data (a stray one would fail here)
        assert any(fnmatch.fnmatch(p.name, g) for g in _package_data_globs(p)), f"{p}: not in package-data"


def test_the_build_cache_is_the_users_not_the_packages(monkeypatch):
    monkeypatch.delenv("PLIF_CACHE_DIR", raising=False)
    assert cpu_build.cache_dir() == Path.home() / ".cache" / "plif" / "kernels"
    monkeypatch.setenv("PLIF_CACHE_DIR", "/somewhere")
    assert cpu_build.cache_dir() == Path("/somewhere/kernels")


def test_the_code_parses_as_the_oldest_python_it_claims():
    oldest = PYPROJECT["project"]["requires-python"]
    assert oldest.startswith(">=3.")
    version = tuple(int(v) for v in oldest[2:].split("."))
    for p in PACKAGE.rglob("*.py"):
        ast.parse(p.read_text(), str(p), feature_version=version)  # a SyntaxError names the file and line


def test_the_version_is_written_once():
    assert "version" not in PYPROJECT["project"] and "version" in PYPROJECT["project"]["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "plif.__version__"}


# ------------------------------------------------------------------ the built sdist and wheel


def _source_files() -> list[str]:
    """The checkout's files as git sees them (tracked, and new ones it does not ignore)."""
    r = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"not a git checkout ({r.stderr.strip()[:80]}): the packaging tests build from git's file list")
    return sorted(f for f in r.stdout.splitlines() if (REPO / f).is_file())  # a deleted, unstaged file is gone


def _build(hook: str, source: Path, out: Path) -> Path:
    """Run setuptools' PEP 517 ``hook`` in ``source`` (a fresh process, as a build front end does)."""
    r = subprocess.run([sys.executable, "-c", f"from setuptools import build_meta; print(build_meta.{hook}({str(out)!r}))"],
                       cwd=source, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return out / r.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """``(source files, sdist, wheel)``: the sdist built from a copy of the checkout, the wheel from the
    unpacked sdist."""
    need = next(r for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools"))
    have = importlib.metadata.version("setuptools")
    if int(have.split(".")[0]) < int(need.split(">=")[1].split(".")[0]):
        pytest.skip(f"setuptools {have} installed, the build needs {need} (pip install -e '.[dev]')")
    tmp = tmp_path_factory.mktemp("packaging")
    copy = tmp / "checkout"
    files = []
    for f in _source_files():
        (copy / f).parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copy2(REPO / f, copy / f)
        except FileNotFoundError:  # a new file another test removed meanwhile
            continue
        files.append(f)
    (tmp / "dist").mkdir()
    sdist = _build("build_sdist", copy, tmp / "dist")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp / "unpacked", **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    (unpacked,) = (tmp / "unpacked").iterdir()
    wheel = _build("build_wheel", unpacked, tmp / "dist")
    return files, sdist, wheel


@pytest.mark.slow
def test_the_wheel_holds_the_package_byte_for_byte_and_nothing_else(built):
    files, _, wheel = built
    package = {f.removeprefix("src/"): REPO / f for f in files if f.startswith("src/plif/")}
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        inside = [n for n in names if n.startswith("plif/")]
        assert sorted(inside) == sorted(package)  # no tests, scripts, docs; no module or kernel source missing
        assert all(z.read(n) == package[n].read_bytes() for n in inside)
        info = f"plif-{plif.__version__}.dist-info/"
        assert {n for n in names if n not in inside} == {info + x for x in (
            "METADATA", "WHEEL", "entry_points.txt", "top_level.txt", "RECORD", "licenses/LICENSE")}
        for f in OPENED_BY_PATH["plif/kernels/cpu_build.py"]:
            assert f"plif/kernels/{f.name}" in inside


@pytest.mark.slow
def test_the_wheel_metadata_is_ready_for_an_index(built):
    _, _, wheel = built
    info = f"plif-{plif.__version__}.dist-info/"
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(info + "METADATA").decode()
        entry = z.read(info + "entry_points.txt").decode()
        license_text = z.read(info + "licenses/LICENSE").decode()
    head, _, body = meta.partition("\n\n")
    fields = [line.split(": ", 1) for line in head.splitlines()]
    one = {k: v for k, v in fields}
    assert one["Name"] == "plif" and one["Version"] == plif.__version__
    assert one["License-Expression"] == "MIT" and one["License-File"] == "LICENSE"
    assert license_text.startswith("MIT License") and license_text == (REPO / "LICENSE").read_text()
    assert one["Requires-Python"] == PYPROJECT["project"]["requires-python"]
    assert one["Description-Content-Type"] == "text/markdown" and body.strip() == (REPO / "README.md").read_text().strip()
    requires = [v for k, v in fields if k == "Requires-Dist" and "extra ==" not in v]
    assert sorted(requires) == sorted(PYPROJECT["project"]["dependencies"])
    classifiers = [v for k, v in fields if k == "Classifier"]
    assert "Programming Language :: Python :: 3" in classifiers and not any("License ::" in c for c in classifiers)
    assert "[console_scripts]\nplif = plif.cli.main:main" in entry


@pytest.mark.slow
def test_the_sdist_is_the_source_tree(built):
    """Decided: the sdist carries the tests and what they read (scripts, benchmarks, docs), so a packager
    can check what they build; only CI's entry point and .gitignore stay behind."""
    files, sdist, _ = built
    top = f"plif-{plif.__version__}/"
    with tarfile.open(sdist) as tar:
        names = {m.name.removeprefix(top) for m in tar.getmembers() if m.isfile()}
    generated = {"PKG-INFO", "setup.cfg"} | {n for n in names if n.startswith("src/plif.egg-info/")}
    assert names - generated == set(files) - NOT_IN_SDIST
    assert "tests/test_packaging.py" in names and "LICENSE" in names


@pytest.mark.slow
def test_the_installed_package_runs_from_its_own_files(built, tmp_path):
    """The wheel unpacked where pip would put it, imported from outside the checkout: plif and its
    kernel sources come from there, every module imports, the cache stays the user's."""
    _, _, wheel = built
    site = tmp_path / "site-packages"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    script = """
import importlib, sys
from pathlib import Path
site = Path(sys.argv[1]).resolve()
import plif
from plif.kernels import cpu_build
assert Path(plif.__file__).resolve().is_relative_to(site), plif.__file__
assert all(f.is_file() and f.resolve().is_relative_to(site) for f in cpu_build.SOURCES + cpu_build.HEADERS)
assert not cpu_build.cache_dir().resolve().is_relative_to(site)
for p in sorted((site / "plif").rglob("*.py")):
    name = ".".join(p.relative_to(site).with_suffix("").parts).removesuffix(".__init__")
    if not name.endswith("__main__"):
        importlib.import_module(name)
assert all(m.__file__ is None or Path(m.__file__).resolve().is_relative_to(site)
           for n, m in list(sys.modules.items()) if n == "plif" or n.startswith("plif."))
from plif.cli.main import main
main(["--version"])
"""
    env = {**os.environ, "PYTHONPATH": str(site)}  # before the checkout's editable install on sys.path
    env.pop("PLIF_CACHE_DIR", None)
    r = subprocess.run([sys.executable, "-c", script, str(site)], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and r.stdout == f"plif {plif.__version__}\n", r.stderr[-3000:]
