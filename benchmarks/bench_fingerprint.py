"""What the content checks of the frame cache cost: the whole-file hash (``plif data prepare``,
``plif data verify``), the edges hash of every load, and the copy check across splits.

    .venv/bin/python benchmarks/bench_fingerprint.py [--big-mib 512] [--files 5000] [--shared DIR]

Hashes the shared test data files (``--shared``, default ``../shared/data`` beside the checkout),
a generated ``--big-mib`` MiB file of random bytes, and ``--files`` N-MNIST-sized files (15-25 kB,
sizes colliding as in N-MNIST), all in a temporary folder, from a warm page cache; prints the best
of ``--repeat`` runs.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from plif.data.events.fingerprint import edges_hash, file_hash, file_stat, same_bytes

from bench_copy_check import write_tree  # the N-MNIST-sized tree (this folder is on sys.path when run as a script)


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--big-mib", type=int, default=512)
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--shared", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    shared = [p for p in Path(a.shared).glob("*/*") if p.is_file() and p.suffix != ".txt"]
    if shared:
        size = sum(p.stat().st_size for p in shared)
        t = best(lambda: [file_hash(p) for p in shared], a.repeat)
        print(f"shared data: {len(shared)} files, {size / 1e6:.2f} MB: whole hash {t * 1e3:.2f} ms, {size / 1e6 / t:.0f} MB/s")
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "big.bin"
        with open(big, "wb") as f:
            for _ in range(a.big_mib):
                f.write(os.urandom(1 << 20))
        size = big.stat().st_size
        t = best(lambda: file_hash(big), a.repeat)
        print(f"generated {a.big_mib} MiB: whole hash {t:.2f} s, {size / 1e6 / t:.0f} MB/s; "
              f"edges hash {best(lambda: edges_hash(big), a.repeat) * 1e3:.2f} ms")
        big.unlink()
        files = write_tree(Path(tmp), "files", a.files, 0)
        ts = best(lambda: [file_stat(p) for p in files], a.repeat)
        te = best(lambda: [edges_hash(p) for p in files], a.repeat)
        print(f"{a.files} N-MNIST-sized files: stat {ts / a.files * 1e6:.0f} us/file, "
              f"edges {te / a.files * 1e6:.0f} us/file ({(ts + te):.2f} s for all, stat only {ts:.2f} s)")
        cut = a.files * 4 // 5
        tc = best(lambda: same_bytes(files[cut:], files[:cut]), a.repeat)
        print(f"copy check of {a.files - cut} against {cut} of them: {tc:.2f} s")


if __name__ == "__main__":
    main()
