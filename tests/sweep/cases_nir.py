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

# a plif train --model run of the residual zoo (narrow, written as the training code writes it): SEW AND
# has no NIR form and is refused in one line naming the block; SEW ADD exports (plif's importer, exact)
MODEL_RUN_DRIVER = """
import hashlib, sys
from pathlib import Path
from plif.models.factories import build_model
from plif_testing import save_run
code = Path("sewnet.py").resolve()
code.write_text("from plif.models import residual\\n\\n\\ndef make(input_shape, num_classes):\\n"
                f"    return residual.{sys.argv[1]}(input_shape, num_classes, width=4)\\n")
ref = f"{code}:make"
save_run(Path("run"), net=build_model(ref, (1, 16, 16), 10, 2), spec=None, input_shape=(1, 16, 16), T=2,
         dataset="fashion-mnist", model=ref, num_classes=10, model_sha256=hashlib.sha256(code.read_bytes()).hexdigest())
"""


def _model_run(factory: str, expect: str, says: str) -> Case:
    def run(env):
        from .run import plif_env

        made = env.plif(factory, python=MODEL_RUN_DRIVER, timeout=180,
                        extra_env={"PYTHONPATH": f"{TESTS}:{plif_env()['PYTHONPATH']}"})
        if made.returncode != 0:
            raise RuntimeError(f"the run folder could not be written: {made.stderr.strip()[-300:]}")
        return env.plif("export", "run", "--nir", "net.nir", "--for", "generic", "--trust-module",
                        str(env.tmp / "sewnet.py"), timeout=180)

    def check(tmp, r):
        if says not in r.stdout + r.stderr:
            return f"it does not say {says!r}"
        return None if (tmp / "net.nir").exists() == (expect == "ok") else "a file half-written or missing"

    return Case(f"export-model-run-{factory}", AREA, run=run, check=check, expect=expect, timeout=360)


CASES += [_model_run("sew_resnet18_and", "refuse", "layer1.0 (SEWBasicBlock): mul() combines two values"),
          _model_run("sew_resnet18", "ok", "plif      exact (plif.deploy.read_nir)")]
