#!/usr/bin/env bash
# The main job: set up, fetch Fashion-MNIST from Debian when possible, train on the CPU.
# Extra arguments go to `plif train` (e.g. --epochs 5, --preset paper --device cuda).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] && command -v apt-get >/dev/null; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
    { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq dataset-fashion-mnist; } >/dev/null 2>&1 \
        || echo "note: could not install dataset-fashion-mnist; plif will try to download Fashion-MNIST" >&2
fi
exec .venv/bin/plif train "$@"
