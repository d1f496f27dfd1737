import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def interpreted(request) -> dict:
    """``group -> case name -> result`` of one run of the test module's ``_INTERPRETED`` script in
    Triton's interpreter (``TRITON_INTERPRET=1``, one subprocess per module): every line it prints
    that starts with ``{`` is one JSON result with its ``group`` and ``case``.  The script's
    arguments are the module's ``INTERPRETER_ARGS`` (if any), then the tests folder (for
    ``triton_bounds``).  A run that stops early or prints nothing fails with its stderr's end."""
    module = request.module
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    tests = str(Path(__file__).resolve().parents[1])
    proc = subprocess.run([sys.executable, "-c", module._INTERPRETED, *getattr(module, "INTERPRETER_ARGS", ()), tests],
                          env=env, capture_output=True, text=True, timeout=600)
    groups: dict = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            groups.setdefault(r.pop("group"), {})[r["case"]] = r
    if proc.returncode != 0 or not groups:
        pytest.fail(f"the interpreter run stopped early:\n{proc.stderr[-3000:]}")
    return groups
