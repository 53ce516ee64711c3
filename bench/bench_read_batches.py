"""The export's big read beside the CLI's imports, by Arrow batch size (``BATCH_ROWS``) and the
interpreter's switch interval: each of the read's threads takes the GIL once per batch and column
to copy it out, while the main thread loads pandas and the analysis; larger batches take it fewer
times, and a shorter interval makes the main thread hand it over sooner (Python's 5 ms: a thread
asking for the GIL held by a busy thread waits that long).

    python bench/bench_read_batches.py --kernels 1000000 --rounds 5 --batches 16384 65536
    python bench/bench_read_batches.py --switch 0.005 0.0005      # each batch size with each

Each round runs one fresh process per variant (batch size, interval), interleaved: the process
sets the interval, starts the read of the export's kernel and runtime tables
(``shared_read._read_split``, the shares the CLI would use on this machine's CPUs) in a thread,
imports what the CLI imports meanwhile, and reports the read's wall time and the time to both
done. Medians, and each variant's against the first's.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

PROBE = """
import sys, threading, time
from pathlib import Path
import numpy, pyarrow
import verifyprof.trace.nsys.columns as columns
from verifyprof.trace.nsys import shared_read
from verifyprof.trace.shares import process_shares
columns.BATCH_ROWS = int(sys.argv[2])
sys.setswitchinterval(float(sys.argv[3]))
path = Path(sys.argv[1])
shares = process_shares(path, min(8, columns.usable_cpus()))
took = {}
def read():
    t = time.perf_counter()
    shared_read._read_split(path, shares)
    took["read"] = time.perf_counter() - t
t0 = time.perf_counter()
thread = threading.Thread(target=read)
thread.start()
import pandas, verifyprof.attribution.breakdown, verifyprof.attribution.reduce
import verifyprof.report.console
thread.join()
print(took["read"], time.perf_counter() - t0)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", type=int, nargs="+", default=[16_384, 65_536])
    parser.add_argument(
        "--switch", type=float, nargs="+", default=[0.005], help="switch intervals, seconds"
    )
    args = parser.parse_args()
    from bench_cli_process import _env, export

    path = export(args.kernels, HERE / "out" / "ranks")
    variants = [(b, s) for b in args.batches for s in args.switch]
    runs: dict[tuple[int, float], list[tuple[float, float]]] = {v: [] for v in variants}
    for n in range(args.rounds):
        line = []
        for batch, switch in variants:
            done = subprocess.run(
                [sys.executable, "-c", PROBE, str(path), str(batch), str(switch)],
                capture_output=True,
                text=True,
                env=_env(HERE.parent),
                cwd=HERE.parent,
                check=True,
            )
            read, both = map(float, done.stdout.split())
            runs[batch, switch].append((read, both))
            line.append(f"{batch}/{switch * 1000:g} ms: read {read:.3f} s, both {both:.3f} s")
        print(f"round {n + 1}: " + "; ".join(line), flush=True)
    first = statistics.median(b for _, b in runs[variants[0]])
    for (batch, switch), seen in runs.items():
        read = statistics.median(r for r, _ in seen)
        both = statistics.median(b for _, b in seen)
        print(
            f"batch {batch}, switch interval {switch * 1000:g} ms: medians read {read:.3f} s,"
            f" both {both:.3f} s ({both / first:.2f}x)"
        )


if __name__ == "__main__":
    main()
