"""The CLI as a user runs it (issue 43 item 6): ``verifyprof breakdown FILE`` timed from exec to
exit, interpreter start and imports included, against a fresh interpreter that runs the sqlite3
fetchall of the two queries the breakdown needs, on one export of 8 ranks x 1M kernels, in one
run (every contender once per round, interleaved; ratios taken within a round, medians printed).

    python bench/bench_cli_process.py                      # 1M kernels over 8 ranks, 5 rounds
    python bench/bench_cli_process.py --kernels 200000 --rounds 3     # quick
    python bench/bench_cli_process.py --json out.json
    python bench/bench_cli_process.py --against ../main     # the code before, in the same rounds
    python bench/bench_cli_process.py --against .head --against .variant  # several, each named

Contenders, each a fresh process started here (``time.perf_counter`` around ``Popen`` ..
``wait``; stdout to /dev/null):

* ``fetchall``: ``python -c`` connect, then ``SELECT start, end, deviceId, streamId,
  correlationId, globalPid, shortName FROM CUPTI_ACTIVITY_KIND_KERNEL`` and ``SELECT start, end,
  globalTid, correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME``, each ``fetchall()``;
* ``table``: ``python -m verifyprof.cli breakdown FILE``;
* ``--json``: ``python -m verifyprof.cli breakdown FILE --json``;
* ``start-up``: ``python -m verifyprof.cli breakdown FILE`` with stderr on a pseudo-terminal,
  timed to the first byte it writes there (the status line: the user's first output).

``--against DIR`` (repeatable): ``table`` and ``--json`` also run on another checkout's code (the
code before a change, or a variant of it), each right after this checkout's, in the same rounds,
with their own ratios to the same round's ``fetchall``, named ``table (DIR's name)``; the targets
are checked on this checkout's alone.

Targets (issue 43 item 6): table and --json at most 0.6x of fetchall on 16 cores, at most 1.0x on
2 idle cores; start-up to first output under 0.3 s. The core count is this machine's
(``os.sched_getaffinity``); exit code 1 if a target for it is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

FETCHALL = """
import sqlite3, sys
con = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
k = con.execute('SELECT start, "end", deviceId, streamId, correlationId, globalPid, shortName'
                ' FROM CUPTI_ACTIVITY_KIND_KERNEL').fetchall()
r = con.execute('SELECT start, "end", globalTid, correlationId, nameId'
                ' FROM CUPTI_ACTIVITY_KIND_RUNTIME').fetchall()
print(len(k), len(r))
"""
CLI = [sys.executable, "-m", "verifyprof.cli", "breakdown"]
TARGETS = {16: 0.6, 2: 1.0}  # cores: the most a CLI run may take, as a share of fetchall's time
STARTUP_UNDER = 0.3


def _env(code: Path) -> dict[str, str]:
    """The checkout's code first on the path, as an installed console script would import it,
    its bytecode cached as an installed package's is (``pip install`` compiles it): where the
    environment forbids writing bytecode (PYTHONDONTWRITEBYTECODE), every run would compile
    every module it imports again, ~0.25 s of a run on 2 cores; it goes under ``bench/out``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(REPO / "bench" / "out" / "pycache")
    return env | {"PYTHONPATH": f"{code}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def measured(command: list[str], code: Path = REPO) -> dict:
    """Seconds from exec to exit of one fresh process and its CPU seconds (user and system, its
    own and its reaped workers'), run in ``code`` (``python -m`` imports from the working
    directory first: another folder's ``verifyprof`` would be measured); a failure stops the
    bench."""
    with open(os.devnull, "wb") as sink, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen(command, stdout=sink, stderr=err, env=_env(code), cwd=code)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(command)}: exit {proc.returncode}\n{err.read().decode()}")
    return {"seconds": seconds, "cpu_s": usage.ru_utime + usage.ru_stime, "rows": 0}


def timed(command: list[str]) -> float:
    return measured(command)["seconds"]


def first_output(command: list[str], code: Path = REPO) -> float:
    """Seconds from exec to the first byte the process writes to its terminal (stderr on a pty:
    the status line), then the process is left to finish."""
    master, slave = pty.openpty()
    with open(os.devnull, "wb") as sink:
        t = time.perf_counter()
        proc = subprocess.Popen(command, stdout=sink, stderr=slave, env=_env(code), cwd=code)
        os.close(slave)
        seconds = float("nan")
        while True:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:
                    chunk = b""
                if chunk and seconds != seconds:
                    seconds = time.perf_counter() - t
                if not chunk:
                    break
            elif proc.poll() is not None:
                break
        proc.wait()
    os.close(master)
    return seconds


def export(kernels: int, out: Path) -> Path:
    from bench_nsys import export_for

    return export_for(kernels, 8, out, regenerate=False)


def run(path: Path, rounds: int, against: list[Path] = ()) -> dict:
    contenders = {"fetchall": lambda: measured([sys.executable, "-c", FETCHALL, str(path)])}
    others = {f"{code.name}": code for code in against}
    if len(others) != len(against):
        raise SystemExit("--against: give checkouts of distinct folder names (each names its row)")
    for name, extra in (("table", []), ("--json", ["--json"])):
        contenders[name] = lambda extra=extra: measured([*CLI, str(path), *extra])
        for label, code in others.items():
            contenders[f"{name} ({label})"] = lambda extra=extra, code=code: measured(
                [*CLI, str(path), *extra], code
            )
    times: dict[str, list[float]] = {name: [] for name in contenders}
    cpu: dict[str, list[float]] = {name: [] for name in contenders}
    startup: list[float] = []
    timed([*CLI, str(path)])  # the page cache and bytecode warm before round 1, for every one
    for code in against:
        measured([*CLI, str(path)], code)
    for r in range(rounds):
        for name, go in contenders.items():
            one = go()
            times[name].append(one["seconds"])
            cpu[name].append(one["cpu_s"])
        startup.append(first_output([*CLI, str(path)]))
        print(
            f"round {r + 1}: "
            + ", ".join(f"{n} {v[-1]:.2f} s ({cpu[n][-1]:.2f} CPU-s)" for n, v in times.items())
            + f", first output {startup[-1]:.3f} s",
            flush=True,
        )
    ratios = {
        name: statistics.median(a / b for a, b in zip(times[name], times["fetchall"]))
        for name in times
        if name != "fetchall"
    }
    return {
        "file": str(path),
        "against": [str(code) for code in against],
        "cores": len(os.sched_getaffinity(0)),
        "seconds": {n: statistics.median(v) for n, v in times.items()},
        "cpu_s": {n: statistics.median(v) for n, v in cpu.items()},
        "every": times,
        "ratios": ratios,
        "ratio_range": {
            n: [
                min(a / b for a, b in zip(times[n], times["fetchall"])),
                max(a / b for a, b in zip(times[n], times["fetchall"])),
            ]
            for n in ratios
        },
        "startup_s": statistics.median(startup),
        "startup_every": startup,
    }


def verdicts(result: dict) -> list[tuple[str, bool | None]]:
    cores = result["cores"]
    limit = TARGETS.get(cores)
    out = []
    for name, ratio in result["ratios"].items():
        if name not in ("table", "--json"):
            low, high = result["ratio_range"][name]
            out.append(
                (f"{name} {ratio:.3f}x of fetchall, rounds {low:.2f}-{high:.2f} (another)", None)
            )
            continue
        low, high = result["ratio_range"][name]
        met = None if limit is None else ratio <= limit
        out.append(
            (
                f"{name} {ratio:.3f}x of fetchall, rounds {low:.2f}-{high:.2f}"
                f" (target on {cores} cores: {limit})",
                met,
            )
        )
    s = result["startup_s"]
    out.append((f"start-up to first output {s:.3f} s (target < {STARTUP_UNDER} s)", s < 0.3))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kernels", type=int, default=1_000_000, help="kernels over all 8 ranks")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "ranks")
    p.add_argument("--file", type=Path, help="an existing export instead of the generated one")
    p.add_argument("--json", type=Path, help="write the result here")
    p.add_argument(
        "--against",
        type=Path,
        action="append",
        default=[],
        help="another checkout (the code before a change, a variant; repeatable): table and"
        " --json also run on its code, right after this checkout's, in the same rounds",
    )
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.file or export(args.kernels, args.out)
    result = run(path, args.rounds, [code.resolve() for code in args.against])
    print(
        f"{path.name}: {result['cores']} cores, medians of {args.rounds} rounds: "
        + ", ".join(f"{n} {s:.2f} s" for n, s in result["seconds"].items())
    )
    missed = False
    for line, met in verdicts(result):
        print(f"  {line}: {'met' if met else 'no target here' if met is None else 'MISSED'}")
        missed |= met is False
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
