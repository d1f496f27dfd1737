"""Peak memory and step time of one training step per memory configuration: the same as
``plif bench memory [options]`` (each configuration in a fresh process; see docs/speed.md).

    python benchmarks/bench_memory.py --json memory.json
    python benchmarks/bench_memory.py --networks dvs128-gesture --configs default,exact,naive --mmap-threshold 131072
    python benchmarks/bench_memory.py --device cuda --batches 4,8      # torch.cuda.max_memory_allocated
"""
import sys

from plif.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["bench", "memory", *sys.argv[1:]]))
