#!/usr/bin/env bash
# Set up and run the whole test suite (CPU only; Triton kernels run in its interpreter).
# The tests run in parallel, one pytest-xdist worker per core (PLIF_TEST_WORKERS=N to choose, 0 for
# none); a module whose tests share one expensive run stays on one worker (tests/conftest.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -n "${PLIF_TEST_WORKERS:-auto}" --dist loadgroup "$@"
