"""A real ``verifyprof`` process with its reads counted: every ``open`` of a file in the given
folders (a Python audit hook, so no read can escape it) and every verify profile the model makes
and every step assignment (``assign_steps``; both counting wrappers installed before anything
imports them by name). Used by the once-ness tests of the commands that read several inputs
(compare, report of several captures) and of the data files every command reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = r"""
import collections, json, sys
from pathlib import Path

folders = {Path(p).resolve() for p in json.loads(sys.argv[1])}
out = Path(sys.argv[2])
opened = collections.Counter()


def audit(event, args):
    if event == "open" and args and isinstance(args[0], (str, Path)):
        path = Path(args[0]).absolute()
        if path.parent in folders:
            opened[f"{path.parent.name}/{path.name}"] += 1


sys.addaudithook(audit)
import verifyprof.attribution.assignment as assignment

assigned = []
assign_steps = assignment.assign_steps


def counted_assign(*args, **kw):
    assigned.append(1)
    return assign_steps(*args, **kw)


assignment.assign_steps = counted_assign  # before any module imports it by name
import verifyprof.model.inputs.profile as profile

made = []
real = profile.verify_profile


def counted(*args, **kw):
    made.append(kw.get("step_name"))
    return real(*args, **kw)


profile.verify_profile = counted
from verifyprof.cli import main

sys.argv = ["verifyprof", *sys.argv[3:]]
try:
    main()
except SystemExit as done:
    code = done.code
else:
    code = 0
found = {"opened": opened, "profiles": len(made), "assigned": len(assigned), "code": code}
out.write_text(json.dumps(found))
"""


def counted_run(
    folders: list[Path],
    out: Path,
    *command: str,
    cache: Path | None = None,
    env: dict[str, str] | None = None,
) -> dict:
    """``verifyprof COMMAND`` in its own process: ``opened`` ({'folder/file': opens}),
    ``profiles`` (verify profiles made), ``assigned`` (step assignments run) and ``code``.
    ``cache``: its ``VERIFYPROF_CACHE`` (a gzipped export is decompressed there once: warm it
    first to count one command's reads; None: the suite's own); ``env``: more variables."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps([str(f) for f in folders]), str(out), *command],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env={**os.environ, **({"VERIFYPROF_CACHE": str(cache)} if cache else {}), **(env or {})},
    )
    assert out.is_file(), done.stderr[-2000:]
    found = json.loads(out.read_text())
    assert found["code"] in (0, None), done.stderr[-2000:]
    return found
