#!/usr/bin/env bash
# The prepared GPU benchmark: one invocation per plan, each < 9 minutes on one H100/H200, no network;
# every stage has a time budget (benchmarks/gpu/run.py's docstring lists them with their estimates):
# the default plan "first", then "--stages second --budget SECONDS_LEFT" on the same warm machine.
# Without CUDA it is a tiny CPU dry run (what CI tests).
#
#   benchmarks/gpu/run.sh FASHION_MNIST_GZ_DIR OUT_DIR [SPIKINGJELLY_WHEELS_DIR] [run.py options]
#
# Prints a summary table; OUT_DIR gets four files: results.tar.gz (every stage's JSON and the
# protocol's run folder without checkpoints, repacked after each stage), summary.json, summary.txt
# and log.txt (a failing stage records its error; the others still run).  $PYTHON picks the
# interpreter (default python3); extra options go to benchmarks/gpu/run.py (e.g. --stages grid,sync,
# --stages protocol-full for the whole 64-epoch protocol, --stage-budgets memory=60).
set -u
if [ $# -lt 2 ]; then
    echo "usage: $0 FASHION_MNIST_GZ_DIR OUT_DIR [SPIKINGJELLY_WHEELS_DIR] [run.py options]" >&2
    exit 2
fi
data=$1; out=$2; shift 2
wheels=()
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
    wheels=(--spikingjelly-wheels "$1"); shift
fi
if [ ! -d "$data" ]; then
    echo "$0: Fashion-MNIST folder not found: $data" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
"${PYTHON:-python3}" -u "$here/run.py" --data-dir "$data" --out "$out" "${wheels[@]}" "$@" 2>&1 | tee "$out/log.txt"
exit "${PIPESTATUS[0]}"
