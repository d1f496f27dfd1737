#!/usr/bin/env bash
# Refresh scripts/constraints.txt, the versions `scripts/setup.sh` installs (the test environment is
# pinned: a new release of a test dependency once broke the suite on a fresh clone days after it passed).
# It builds a fresh environment with the newest releases the ranges in pyproject.toml allow, runs the
# whole suite there, and only if it passes writes what that environment holds as the new constraints.
# `pip install .` for users keeps the ranges of pyproject.toml; only the scripts use this file.
#   bash scripts/refresh_constraints.sh          (about 6 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
ENV=$(mktemp -d)/venv
trap 'rm -rf "$(dirname "$ENV")"' EXIT
PLIF_CONSTRAINTS=none PLIF_VENV="$ENV" bash scripts/setup.sh
"$ENV/bin/python" -m pytest -n "${PLIF_TEST_WORKERS:-auto}" --dist loadgroup -q
{
    echo "# Written by scripts/refresh_constraints.sh on $(date -u +%Y-%m-%d) after the whole suite passed"
    echo "# with these versions (Python $("$ENV/bin/python" -c 'import platform; print(platform.python_version())')). torch is pinned by scripts/setup.sh itself."
    "$ENV/bin/pip" freeze --all --exclude-editable | grep -v -i -E "^(torch|plif|pip)=="
} > scripts/constraints.txt.tmp
mv scripts/constraints.txt.tmp scripts/constraints.txt
echo "scripts/constraints.txt refreshed; commit it"
