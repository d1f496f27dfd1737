"""Time read + integrate of a synthetic 1,000,000-event recording (AEDAT 3.1 and AEDAT 2.0).

    .venv/bin/python benchmarks/bench_events.py [--events 1000000] [--T 20] [--packet 4096]

Writes the files to a temporary folder (random DVS128 events, time-sorted; AEDAT 3.1 in packets
of ``--packet`` events with a timestamp overflow halfway), checks that each reader returns every
event, and prints the best of ``--repeat`` runs of ``read_events`` + ``events_to_frames`` (count
split, 128 x 128).  The target is <= 0.2 s per file.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from plif.data.events import read_events
from plif.data.frames import events_to_frames


def synthetic(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    t = np.sort(rng.integers(0, 6_000_000, n)).astype(np.int64)
    return t, rng.integers(0, 128, n), rng.integers(0, 128, n), rng.integers(0, 2, n)


def aedat31_bytes(t, x, y, p, packet: int) -> bytes:
    head = b"#!AER-DAT3.1\r\n#Format: RAW\r\n#Source 1: DVS128\r\n#!END-HEADER\r\n"
    data = ((x.astype(np.uint32) << 17) | (y.astype(np.uint32) << 2) | (p.astype(np.uint32) << 1) | 1)
    chunks = [head]
    for s in range(0, len(t), packet):
        e = slice(s, s + packet)
        m = len(t[e])
        overflow = 0 if s < len(t) // 2 else 1  # second half of the file after one overflow
        ev = np.empty(m, dtype=[("data", "<u4"), ("ts", "<i4")])
        ev["data"], ev["ts"] = data[e], t[e]
        chunks.append(np.array([1, 1], "<i2").tobytes() + np.array([8, 4, overflow, m, m, m], "<i4").tobytes())
        chunks.append(ev.tobytes())
    return b"".join(chunks)


def aedat2_bytes(t, x, y, p) -> bytes:
    head = b"#!AER-DAT2.0\r\n# AEChip: ch.unizh.ini.jaer.chip.retina.DVS128\r\n"
    addr = (y.astype(np.uint32) << 8) | ((127 - x).astype(np.uint32) << 1) | p.astype(np.uint32)
    pairs = np.stack([addr, t.astype(np.uint32)], 1).astype(">u4")
    return head + pairs.tobytes()


def best_time(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--T", type=int, default=20)
    ap.add_argument("--packet", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    t, x, y, p = synthetic(args.events)
    with tempfile.TemporaryDirectory() as d:
        files = {"aedat3.1": Path(d) / "synthetic31.aedat", "aedat2": Path(d) / "synthetic20.aedat"}
        files["aedat3.1"].write_bytes(aedat31_bytes(t, x, y, p, args.packet))
        files["aedat2"].write_bytes(aedat2_bytes(t, x, y, p))
        for fmt, path in files.items():
            ev = read_events(path)
            assert len(ev) == args.events and np.array_equal(ev["x"], x) and np.array_equal(ev["y"], y)
            frames = events_to_frames(ev, args.T, (128, 128))
            assert frames.sum() == args.events
            t_read = best_time(lambda: read_events(path), args.repeat)
            t_frames = best_time(lambda: events_to_frames(ev, args.T, (128, 128)), args.repeat)
            t_both = best_time(lambda: events_to_frames(read_events(path), args.T, (128, 128)), args.repeat)
            mb = path.stat().st_size / 1e6
            print(f"{fmt:9s} {args.events} events {mb:6.1f} MB  read {t_read * 1e3:7.1f} ms  "
                  f"frames(T={args.T}) {t_frames * 1e3:7.1f} ms  read+frames {t_both * 1e3:7.1f} ms  "
                  f"({'ok' if t_both <= 0.2 else 'SLOWER than'} 0.2 s target)")


if __name__ == "__main__":
    main()
