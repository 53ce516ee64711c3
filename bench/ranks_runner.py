"""How ``bench_ranks.py`` runs its contenders: each in a fresh interpreter (``bench_ranks.py
--measure``), its peak RSS sampled every 20 ms over that process and all its descendants (the
largest single process reported), stderr on a pseudo-terminal where the contender runs under the
CLI's status line; every contender once per round, interleaved, so ratios are taken within a
round; ``--against``: a contender run again on another checkout's code, right after its own run.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

# the script whose ``--measure NAME FILES...`` runs one contender (ranks_contenders.MEASURES)
SCRIPT = Path(__file__).resolve().parent / "bench_ranks.py"
# the code measured: this checkout, or another one (--against: a contender run again on it)
CODE_ENV = "BENCH_RANKS_CODE"
AGAINST = " (--against)"
BASELINES = ("fetchall", "json.loads", "process fetchall")  # measures the others are set against


def _sample_peaks(pid: int, peaks: dict[int, float], stop: threading.Event) -> None:
    import psutil

    root = psutil.Process(pid)
    while not stop.is_set():
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            break
        for proc in procs:
            try:
                peaks[proc.pid] = max(peaks.get(proc.pid, 0.0), proc.memory_info().rss / 2**20)
            except psutil.Error:
                pass
        stop.wait(0.02)


def _drain(master: int, into: list[bytes]) -> None:
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            return
        if not chunk:
            return
        into.append(chunk)


def run_measure(name: str, paths: list[Path], code: Path | None = None) -> dict:
    """One contender in a fresh interpreter (importing verifyprof from ``code``, default this
    checkout); its time, and the largest RSS of it or any worker."""
    command = [sys.executable, str(SCRIPT), "--measure", name, *map(str, paths)]
    env = {**os.environ, CODE_ENV: str(code)} if code is not None else None
    peaks: dict[int, float] = {}
    stop = threading.Event()
    tty = (
        "on a tty" in name
    )  # stderr a pseudo-terminal (its output drained here), as a user's shell has it
    master, slave = pty.openpty() if tty else (None, None)
    child = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=slave if tty else subprocess.PIPE,
        text=True,
        env=env,
    )
    sampler = threading.Thread(target=_sample_peaks, args=(child.pid, peaks, stop), daemon=True)
    sampler.start()
    drained: list[bytes] = []
    if tty:
        os.close(slave)
        drain = threading.Thread(target=_drain, args=(master, drained), daemon=True)
        drain.start()
    out, err = child.communicate()
    if tty:
        drain.join()
        os.close(master)
        err = b"".join(drained).decode(errors="replace")
    stop.set()
    sampler.join()
    if child.returncode != 0:
        raise SystemExit(f"{name} failed:\n{err}")
    result = json.loads(out.strip().splitlines()[-1])
    result["peak_rss_mb"] = max(peaks.values(), default=0.0)
    result["parent_rss_mb"] = peaks.get(child.pid, 0.0)
    return result


def rounds(
    plan: list[tuple[str, str, list[Path]]], repeat: int, codes: dict[str, Path] | None = None
) -> dict[str, list[dict]]:
    """Every (label, measure, files) once per round, interleaved; ratios are taken within a
    round. ``codes``: the labels run on another checkout's code."""
    runs: dict[str, list[dict]] = {label: [] for label, _, _ in plan}
    for i in range(repeat):
        for label, name, paths in plan:
            r = run_measure(name, paths, (codes or {}).get(label))
            runs[label].append(r)
            print(
                f"  round {i + 1} {label:<44} {r['seconds']:8.3f} s  peak"
                f" {r['peak_rss_mb']:6.0f} MB",
                flush=True,
            )
    return runs


def against(
    plan: list[tuple[str, str, list[Path]]], code: Path | None
) -> tuple[list[tuple[str, str, list[Path]]], dict[str, Path]]:
    """The plan with every contender but the baselines run a second time on ``code`` (labelled
    with AGAINST), right after its run on this checkout; and the labels run on ``code``."""
    if code is None:
        return plan, {}
    out, codes = [], {}
    for label, name, paths in plan:
        out.append((label, name, paths))
        if name not in BASELINES:
            out.append((label + AGAINST, name, paths))
            codes[label + AGAINST] = code.resolve()
    return out, codes
