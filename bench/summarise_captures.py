"""Capture folders kept as their summary, not their trace (issue 43: the tracked tree <= 60 MB).

A capture folder in ``bench/results`` holds its manifest, results and logs beside the trace
(``capture.sqlite.gz``, 2.7-3.1 MB). Each campaign keeps one trace raw; every other capture keeps
``breakdown.json`` in the trace's place: ``verifyprof breakdown DIR --json`` of that trace, the
per-step breakdown every reader of a capture folder takes in its stead (``whatif``, ``report``,
``compare`` and the benches read the folder alike; ``kernels`` and a report's timeline need the
trace, which the repository's history keeps). This writes the summary from the trace, so the step
is reproducible from a checkout that has it:

    python bench/summarise_captures.py bench/results/load_mha_h200/C1 ...   # write breakdown.json
    python bench/summarise_captures.py --check DIR ...  # the committed summary equals the trace's
    python bench/summarise_captures.py --list           # which captures each campaign keeps raw

Run it from the repository root: the breakdown names its trace by the path given.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
TRACE = "capture.sqlite.gz"
SUMMARY = "breakdown.json"


def breakdown_of(folder: Path) -> bytes:
    """``verifyprof breakdown FOLDER --json`` (the trace with its manifest), as printed."""
    if not (folder / TRACE).is_file():
        raise SystemExit(f"summarise_captures: {folder}: no {TRACE} to summarise")
    done = subprocess.run(
        [sys.executable, "-m", "verifyprof.cli", "breakdown", str(folder), "--json"],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"summarise_captures: {folder}: {done.stderr.decode().strip()}")
    return done.stdout


def write(folder: Path) -> Path:
    """The folder's breakdown.json, written atomically beside its trace."""
    data = breakdown_of(folder)
    out = folder / SUMMARY
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".breakdown.", suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, out)
    return out


def kept(campaign: Path) -> tuple[list[str], list[str]]:
    """(captures kept raw, captures kept as their breakdown) of one campaign folder."""
    folders = sorted(p.parent for p in campaign.rglob("manifest.json"))
    raw = [str(f.relative_to(campaign)) for f in folders if (f / TRACE).is_file()]
    summarised = [
        str(f.relative_to(campaign))
        for f in folders
        if not (f / TRACE).is_file() and (f / SUMMARY).is_file()
    ]
    return raw, summarised


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="*", type=Path, help="capture folders with their trace")
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    parser.add_argument("--list", action="store_true", help="raw and summarised captures")
    args = parser.parse_args(argv)
    if args.list:
        for campaign in sorted(p for p in RESULTS.iterdir() if p.is_dir()):
            raw, summarised = kept(campaign)
            if raw or summarised:
                print(f"{campaign.name}: raw {', '.join(raw) or '-'}; "
                      f"breakdown {', '.join(summarised) or '-'}")  # fmt: skip
        return 0
    differ = 0
    for folder in args.folders:
        if args.check:
            same = (folder / SUMMARY).read_bytes() == breakdown_of(folder)
            differ += not same
            print(f"{folder}: {'same' if same else 'DIFFERS'}")
        else:
            print(write(folder))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
