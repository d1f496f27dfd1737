#!/usr/bin/env bash
# Install plif as a library user would and use it (issue 40), beyond what tests/test_packaging.py can do
# in the suite's time:
#   1. build the sdist and the wheel from the checkout's files with `python -m build` (the sdist, then the
#      wheel from the unpacked sdist, each in build isolation: setuptools from the package index);
#   2. a fresh virtualenv (no system site-packages, not the checkout's .venv): torch, then `pip install` of
#      the wheel (numpy, tqdm, pooch from the index);
#   3. from a folder outside the checkout: `plif --version` (the console script), `import plif` from the
#      virtualenv, the CPU kernel compiled from the installed C++ sources into a fresh user cache (nothing
#      written into site-packages), and `plif train` for one short epoch on Fashion-MNIST.
# Fashion-MNIST: /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist), else DATA_DIR=folder,
# else it is downloaded.  KEEP=1 keeps the work folder; PYTHON picks the interpreter; TORCH the torch
# requirement (default torch==2.13.0, the CPU build these machines install offline).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PY=${PYTHON:-python3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/plif-wheel.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then echo "work folder: $WORK"; else trap 'rm -rf "$WORK"' EXIT; fi
say() { printf '\n== %s\n' "$*"; }
PIP_QUIET=(-q --disable-pip-version-check)

say "build: sdist and wheel from a copy of the checkout's files"
mkdir -p "$WORK/checkout"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
    if [ -f "$f" ]; then printf '%s\0' "$f"; fi  # a deleted, unstaged file is gone
done | tar -c --null -T - -f - | tar -x -f - -C "$WORK/checkout"
"$PY" -m venv "$WORK/build-env"
"$WORK/build-env/bin/pip" install "${PIP_QUIET[@]}" build
"$WORK/build-env/bin/python" -m build --outdir "$WORK/dist" "$WORK/checkout" > "$WORK/build.log"
ls -l "$WORK/dist"
WHEEL=$(ls "$WORK"/dist/plif-*.whl)

say "install: a fresh virtualenv, torch, then the wheel"
"$PY" -m venv "$WORK/venv"
V=$WORK/venv/bin
grep -q "include-system-site-packages = false" "$WORK/venv/pyvenv.cfg"  # the machine's packages stay out
"$V/pip" install "${PIP_QUIET[@]}" "${TORCH:-torch==2.13.0}"
"$V/pip" install "${PIP_QUIET[@]}" "$WHEEL"
SITE=$("$V/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

mkdir -p "$WORK/elsewhere"
cd "$WORK/elsewhere"  # outside the checkout: nothing of it on sys.path
export PLIF_CACHE_DIR=$WORK/user-cache  # a cold cache: the kernel is compiled from the installed sources
unset PYTHONPATH PLIF_DATA_ROOT || true

say "the console script and the installed package"
"$V/plif" --version
"$V/python" - "$SITE" "$REPO" <<'EOF'
import sys
from pathlib import Path
site, repo = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
import plif
from plif.kernels import cpu_build
where = Path(plif.__file__).resolve()
assert where.is_relative_to(site) and not where.is_relative_to(repo), where
assert all(f.resolve().is_relative_to(site) for f in cpu_build.SOURCES + cpu_build.HEADERS)
assert not any(p.resolve().is_relative_to(repo) for p in map(Path, sys.path) if str(p)), sys.path
print(f"import plif: {where}")
EOF

say "the CPU kernel, compiled from the installed sources into the user cache"
"$V/python" - <<'EOF'
import time
from plif.kernels import cpu_build
t = time.perf_counter()
lib = cpu_build.load_library()
assert lib is not None, cpu_build.BUILD_ERROR
built = sorted(cpu_build.cache_dir().glob("*/libplif_cpu_neuron.so"))
assert built, cpu_build.cache_dir()
print(f"built {built[0]} in {time.perf_counter() - t:.0f} s")
EOF
if find "$SITE/plif" -name '*.so' | grep -q .; then echo "error: a library was written into $SITE/plif" >&2; exit 1; fi

say "plif train: one short epoch on Fashion-MNIST"
DATA=()
if [ -n "${DATA_DIR:-}" ]; then DATA=(--data-dir "$DATA_DIR"); fi
"$V/plif" train --dataset fashion-mnist "${DATA[@]}" --device cpu --epochs 1 --max-train-samples 512 \
    --max-test-samples 256 --out "$WORK/elsewhere/run" 2>&1 | tee "$WORK/train.log"
"$V/python" - "$WORK/elsewhere/run" <<'EOF'
import json, sys
from pathlib import Path
run = Path(sys.argv[1])
s = json.loads((run / "summary.json").read_text())
assert s["finished"] and s["epochs_run"] == 1, s
print(f"run folder {run}: accuracy A {s['accuracy_A']['test_acc']:.2%}")
EOF
if find "$SITE/plif" -name '*.so' | grep -q .; then echo "error: a library was written into $SITE/plif" >&2; exit 1; fi
say "ok: $(basename "$WHEEL") builds, installs and trains"
