"""Run the command line the way a user does, in this process or as a real one.

``verifyprof(...)`` calls ``verifyprof.cli.main``, the console script's entry, inside Typer's
``CliRunner`` isolation (own stdout/stderr, environment, ``sys.argv``): the same parsing, the same
``verifyprof: error: ...`` line and exit code for bad input, without an interpreter start per test.
``console_script(...)`` runs the installed ``verifyprof`` executable as a subprocess, for the few
smoke tests of exit codes and the real entry point.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import warnings
from dataclasses import dataclass
from pathlib import Path

from forked_cli import exit_code
from typer.testing import CliRunner

from verifyprof import cli

REPO = Path(__file__).resolve().parents[1]
COLUMNS = "160"  # wide enough that tables do not wrap the names the tests look for


@dataclass(frozen=True)
class Ran:
    """What a finished command left: the fields of ``subprocess.CompletedProcess`` the tests
    read."""

    returncode: int
    stdout: str
    stderr: str


def verifyprof(*args: str, env: dict[str, str] | None = None) -> Ran:
    """``verifyprof ARGS`` in-process through ``cli.main`` (exit code from its ``SystemExit``)."""
    runner = CliRunner()
    with (
        runner.isolation(env={"COLUMNS": COLUMNS, **(env or {})}) as (out, err, _),
        warnings.catch_warnings(),
    ):
        _warn_like_a_fresh_interpreter()
        saved = sys.argv
        sys.argv = ["verifyprof", *args]
        try:
            cli.main()
            code = 0
        except SystemExit as exc:
            code = exit_code(exc)
        finally:
            sys.argv = saved
        sys.stdout.flush()
        sys.stderr.flush()
        return Ran(code, out.getvalue().decode(), err.getvalue().decode())


def _warn_like_a_fresh_interpreter() -> None:
    """Python's default warning filters, printed to (the isolated) stderr: pytest would otherwise
    record them, and a warning beside a one-line error must count as a second line, as it does
    for a user."""
    warnings.resetwarnings()
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
        warnings.simplefilter("ignore", category)
    warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: (
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))
    )


def console_script(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """The installed ``verifyprof`` executable (pip puts it beside this interpreter) as a real
    process."""
    script = Path(sysconfig.get_path("scripts")) / "verifyprof"
    assert script.is_file(), f"console script not installed at {script}: pip install -e ."
    return subprocess.run(
        [str(script), *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        env={**os.environ, "COLUMNS": COLUMNS, **(env or {})},
        timeout=timeout,
    )


def assert_one_line(proc, *fragments: str) -> None:
    """A refusal: exit 2 and one line on stderr, ``verifyprof: error: ...``, holding each
    fragment."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("verifyprof: error: "), proc.stderr[-2000:]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
