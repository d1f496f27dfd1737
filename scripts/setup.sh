#!/usr/bin/env bash
# Create .venv (once) and install plif with its test and plotting extras into it.
# torch is pinned to the CPU build that installs offline on the project's machines; on a GPU
# machine install the CUDA build of torch first and this leaves it alone.
# Every other package is installed at the version scripts/constraints.txt names (the versions the
# whole suite last passed with; scripts/refresh_constraints.sh moves them forward after a passing run).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${PLIF_VENV:-.venv}
PIP=("$VENV/bin/pip" install -qq --disable-pip-version-check)
if [ "${PLIF_CONSTRAINTS:-}" != none ]; then
    PIP+=(-c scripts/constraints.txt)
fi
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
# asked of the installed metadata, not by importing torch (which warns while numpy is not installed yet)
torch_version() { "$VENV/bin/python" -c "import importlib.metadata as m; print(m.version('torch'))" 2>/dev/null || true; }
if [ -z "$(torch_version)" ]; then
    "$VENV/bin/pip" install -qq --disable-pip-version-check "torch==2.13.0"
fi
# A CUDA build of torch installed beforehand brings the Triton it was built with: keep that one.
if [ "${PLIF_CONSTRAINTS:-}" != none ] && [[ "$(torch_version)" == *+cu* ]]; then
    OWN=$(mktemp)
    trap 'rm -f "$OWN"' EXIT
    grep -v -i '^triton==' scripts/constraints.txt > "$OWN"
    PIP=("$VENV/bin/pip" install -qq --disable-pip-version-check -c "$OWN")
fi
"${PIP[@]}" -e ".[dev]"
# Norse (for the NIR interoperability tests) needs only torch, nir and nirtorch at run time, but
# declares torchvision, which would make pip swap the pinned torch: install it without dependencies.
"${PIP[@]}" --no-deps "norse==1.1.0"
# Sinabs 3.1 (SynSense; tests/deploy/test_nir_sinabs.py) pins nir<=1.0.4 and pulls samna, the chip
# driver, which it does not need to import NIR: without dependencies, plus pbr (its version lookup).
"${PIP[@]}" --no-deps "sinabs==3.1.3" "pbr>=6"
# SpikingJelly 2.0.0 is the benchmarks' comparison point, never a dependency: the tests that build the
# same network in it (tests/bench/test_twin.py) run where it is installed. It declares torchvision,
# torchaudio and plotting packages it does not import for its neurons and layers: without
# dependencies, plus loguru (its logger). It needs Python >= 3.11; on 3.10 those tests skip and say why.
if "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    "${PIP[@]}" --no-deps "spikingjelly==2.0.0" "loguru>=0.7,<1"
fi
