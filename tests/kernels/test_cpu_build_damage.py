"""A damaged kernel library in the cache is found before ``dlopen`` maps it (where a truncated file
kills the process with SIGBUS and no word) and rebuilt with one line (issue 45, item 2)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from plif.kernels import cpu_build


@pytest.fixture(scope="module")
def good_library() -> Path:
    """The real library this suite builds once (~/.cache/plif), copied by the fake compiler below."""
    if cpu_build.load_library() is None:
        pytest.skip(f"no CPU kernel library here: {cpu_build.BUILD_ERROR}")
    return cpu_build.loaded_library()


def _fake_compiler(tmp_path: Path, good: Path) -> Path:
    """A "compiler" whose link writes a copy of ``good`` (a real build costs 15-40 s); it counts its links."""
    cxx = tmp_path / "fake-cxx"
    cxx.write_text('#!/bin/sh\ncase "$*" in *--version*) echo fake 1; exit 0;; esac\n'
                   'for a; do out=$a; done\n'
                   f'case " $* " in *" -c "*) : > "$out";; *) echo link >> {tmp_path}/links; cp {good} "$out";; esac\n')
    cxx.chmod(0o755)
    return cxx


def _truncate(path: Path, fraction: float) -> None:
    with open(path, "r+b") as f:
        f.truncate(int(path.stat().st_size * fraction))


def test_empty_cache_dir_counts_as_unset(monkeypatch):
    monkeypatch.setenv("PLIF_CACHE_DIR", "")
    assert cpu_build.cache_dir() == Path.home() / ".cache" / "plif" / "kernels"
    monkeypatch.setenv("PLIF_CACHE_DIR", "/somewhere")
    assert cpu_build.cache_dir() == Path("/somewhere/kernels")


@pytest.mark.parametrize("blanks", [" ", "  ", "\t", " \n "])
def test_a_blank_cache_or_data_folder_variable_counts_as_unset(monkeypatch, blanks):
    """Issue 53.8: ``PLIF_CACHE_DIR="  "`` named a folder of two blanks in the working directory."""
    from plif.catalog import default_root

    monkeypatch.setenv("PLIF_CACHE_DIR", blanks)
    monkeypatch.setenv("PLIF_DATA_ROOT", blanks)
    assert cpu_build.cache_dir() == Path.home() / ".cache" / "plif" / "kernels"
    assert default_root() == Path.home() / ".cache" / "plif" / "data"
    monkeypatch.setenv("PLIF_DATA_ROOT", "")  # Path("") is the working directory
    assert default_root() == Path.home() / ".cache" / "plif" / "data"


def test_every_reader_of_a_folder_variable_asks_env_folder():
    """One function reads plif's folder variables: no ``os.environ`` lookup of them anywhere else."""
    import re

    import plif

    src = Path(plif.__file__).parent
    direct = re.compile(r"environ(\.get\(|\[)\s*[\"'](PLIF_CACHE_DIR|PLIF_DATA_ROOT)")
    found = [str(p.relative_to(src)) for p in src.rglob("*.py") if direct.search(p.read_text())]
    assert found == []


@pytest.mark.parametrize("fraction", [1 / 3, 9 / 10])
def test_truncated_library_is_found_and_rebuilt_with_one_line(tmp_path, monkeypatch, capsys, good_library, fraction):
    monkeypatch.setenv("PLIF_CACHE_DIR", str(tmp_path / "cache"))
    cxx = str(_fake_compiler(tmp_path, good_library))
    built = cpu_build._build(cxx)
    assert cpu_build.library_damage(built) is None and built.read_bytes() == good_library.read_bytes()
    capsys.readouterr()
    _truncate(built, fraction)
    assert "is damaged" in cpu_build.library_damage(built)
    assert cpu_build.cached_libraries() == {built: cpu_build.library_damage(built)}
    assert cpu_build._build(cxx) == built
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "is damaged" in err[0] and "rebuilding it" in err[0] and str(built) in err[0]
    assert cpu_build.library_damage(built) is None and built.read_bytes() == good_library.read_bytes()
    assert (tmp_path / "links").read_text() == "link\n" * 2


def test_same_size_corruption_and_a_missing_record_are_damage(tmp_path, monkeypatch, good_library):
    monkeypatch.setenv("PLIF_CACHE_DIR", str(tmp_path / "cache"))
    built = cpu_build._build(str(_fake_compiler(tmp_path, good_library)))
    data = bytearray(built.read_bytes())
    data[len(data) // 2] ^= 0xFF
    built.write_bytes(bytes(data))
    assert "SHA-256 differs" in cpu_build.library_damage(built)
    built.with_name(built.name + ".json").unlink()
    assert "no readable size and hash record" in cpu_build.library_damage(built)


def test_a_fresh_process_with_a_truncated_library_says_one_line_and_runs(tmp_path, monkeypatch, good_library):
    """The case of the issue: before the fix this process died with exit 135 (SIGBUS), no output."""
    cache = tmp_path / "cache"
    cxx = _fake_compiler(tmp_path, good_library)
    env = {**os.environ, "CXX": str(cxx), "PLIF_CACHE_DIR": str(cache)}
    monkeypatch.setenv("PLIF_CACHE_DIR", str(cache))
    built = cpu_build._build(str(cxx))  # the cache as a finished build leaves it
    _truncate(built, 1 / 3)
    code = ("import torch; from plif.neurons import PLIF, select_backend, NeuronConfig; "
            "assert select_backend(torch.zeros(2, 3), NeuronConfig()) == 'cpu'; "
            "x = torch.randn(3, 2, 4, requires_grad=True); PLIF()(x).sum().backward(); print('ran')")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout == "ran\n", (out.returncode, out.stderr)
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and "is damaged" in lines[0] and "rebuilding it" in lines[0], out.stderr
    assert cpu_build.library_damage(built) is None
