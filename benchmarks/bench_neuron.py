"""Time one PLIF layer on every backend: the same as ``plif bench neuron [options]``.

    python benchmarks/bench_neuron.py --json speed.json
    python benchmarks/bench_neuron.py --cases T8-B16-C128-28x28 --backends cpu,reference --threads 1
"""
import sys

from plif.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["bench", "neuron", *sys.argv[1:]]))
