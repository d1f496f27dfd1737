"""NIR files damaged field by field (issue 39.2), then ``plif export --check FILE``: one line naming the
node and the field, exit 2, for every damage of the table in tests/deploy/test_nir_check.py.

The table is not copied: its names are read from that file (without importing it here), and each
case's file is written by a small driver in a fresh process that imports the table (``PYTHONPATH``
gives it tests/ and src/, as pytest does), writes the test network as plif exports it, applies the
damage with h5py and leaves the message the damage must give beside the file.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from .case import Case
from .cases_run import finished_run

AREA = "nir"
TESTS = Path(__file__).resolve().parents[1]
TABLE = TESTS / "deploy" / "test_nir_check.py"

DRIVER = """
import shutil, sys
from pathlib import Path
import h5py
import test_nir_check as t
from plif.deploy.nir_export import to_nir, write_nir
from plif_testing import small_net
(name, edit, says), = [d for d in t.DAMAGE if d[0] == sys.argv[1]]
path = write_nir(to_nir(small_net()), Path("damaged.nir"))
with h5py.File(path, "r+") as f:
    edit(f)
Path("says.txt").write_text(says)
"""


def damage_names() -> list[str]:
    """The first element of each entry of ``DAMAGE`` in the test file, read from its syntax tree."""
    for node in ast.parse(TABLE.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "DAMAGE" for t in node.targets):
            return [entry.elts[0].value for entry in node.value.elts]
    raise RuntimeError(f"{TABLE}: no DAMAGE table")


def _damaged(name: str) -> Case:
    def run(env):
        from .run import plif_env

        path = f"{TESTS / 'deploy'}:{TESTS}:{plif_env()['PYTHONPATH']}"
        made = env.plif(name, python=DRIVER, extra_env={"PYTHONPATH": path}, timeout=180)
        if made.returncode != 0:
            raise RuntimeError(f"the damaged file could not be written: {made.stderr.strip()[-300:]}")
        return env.plif("export", "--check", "damaged.nir", timeout=180)

    def check(tmp, r):
        says = (tmp / "says.txt").read_text()
        return None if re.search(says, r.stderr) else f"the refusal does not say {says!r}"

    return Case(f"nir-check-{name}", AREA, run=run, check=check, timeout=360)


CASES = [_damaged(name) for name in damage_names()]
CASES.append(Case("export-for-all-with-dt", AREA, ["export", "{tmp}/run", "--nir", "{tmp}/x.nir", "--for", "all", "--dt", "0.5"],
                  setup=lambda tmp: finished_run(tmp / "run"),
                  check=lambda tmp, r: "written" if list(tmp.glob("x*.nir")) else None))
