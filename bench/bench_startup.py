"""The CLI's start-up by the versions of what it loads first (typer): a fresh process that
parses ``breakdown`` and its options and fails on a missing trace (everything a run does before
it reads a byte: the interpreter, typer, the commands, the parse, the one-line error), timed
from exec to exit, for each environment, interleaved, medians.

    pip install --no-deps --target /tmp/typer28 typer==0.28.0    # each version in a folder
    python bench/bench_startup.py --site /tmp/typer28 --site /tmp/typer29 --rounds 9

``--site DIR`` (repeatable): a folder put first on ``PYTHONPATH`` (what it holds replaces the
environment's own); the environment as it is always runs too, first. Each row also says whether
the process loaded pydantic (typer 0.29 coerces every option through it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

PROBE = (  # the same parse, in a process that then says what it loaded
    "import sys\n"
    "sys.argv = ['verifyprof', 'breakdown', 'no-such-trace.sqlite']\n"
    "from verifyprof import cli\n"
    "try:\n"
    "    cli.main()\n"
    "except SystemExit:\n"
    "    pass\n"
    "import typer\n"
    "print(typer.__version__, 'pydantic' in sys.modules)\n"
)


def once(site: str | None) -> tuple[float, str]:
    """Seconds from exec to exit of ``verifyprof breakdown MISSING`` (exit 2), and what loaded."""
    from bench_cli_process import _env

    env = _env(REPO)
    if site:
        env["PYTHONPATH"] = f"{site}{os.pathsep}{env['PYTHONPATH']}"
    cli = [sys.executable, "-m", "verifyprof.cli", "breakdown", "no-such-trace.sqlite"]
    t = time.perf_counter()
    done = subprocess.run(cli, capture_output=True, env=env, cwd=REPO)
    seconds = time.perf_counter() - t
    if done.returncode != 2:
        raise SystemExit(f"{site or 'environment'}: exit {done.returncode}\n{done.stderr!r}")
    seen = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=REPO
    )
    return seconds, seen.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", action="append", default=[], help="a folder put first")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    sites: list[str | None] = [None, *args.site]
    times: dict[str | None, list[float]] = {s: [] for s in sites}
    loaded: dict[str | None, str] = {}
    once(None)  # bytecode and the page cache warm
    for r in range(args.rounds):
        for site in sites:
            seconds, loaded[site] = once(site)
            times[site].append(seconds)
        print(f"round {r + 1}: " + ", ".join(f"{v[-1]:.3f} s" for v in times.values()), flush=True)
    first = statistics.median(times[None])
    for site, seen in times.items():
        version, pydantic = loaded[site].split()
        median = statistics.median(seen)
        low, high = min(seen), max(seen)
        print(
            f"{site or 'this environment'}: typer {version}, pydantic loaded: {pydantic};"
            f" median {median:.3f} s ({median / first:.2f}x), rounds {low:.3f}-{high:.3f}"
        )


if __name__ == "__main__":
    main()
