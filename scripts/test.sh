#!/usr/bin/env bash
# Set up and run the whole test suite (CPU only; Triton kernels run in its interpreter).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
