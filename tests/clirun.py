"""Run the real CLI entry (``verifyprof.cli.main``) in-process, as the console script does."""

from __future__ import annotations

import contextlib
import hashlib
import io
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Result:
    code: int
    out: str
    err: str
    crash: BaseException | None = None  # an exception main() let through: a traceback for the user

    @property
    def text(self) -> str:
        return self.out + self.err


def run_cli(*args: object) -> Result:
    """``verifyprof ARGS`` through ``main()``: exit code, stdout, stderr."""
    from verifyprof.cli import main

    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["verifyprof", *map(str, args)]
    code, crash = 0, None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception as exc:  # noqa: BLE001 - the test reports it as the traceback a user would see
        code, crash = 1, exc
    finally:
        sys.argv = argv
    return Result(code, out.getvalue(), err.getvalue(), crash)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def folder_state(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with its content hash: what an input's folder must keep."""
    return {str(p.relative_to(folder)): digest(p) for p in sorted(folder.rglob("*")) if p.is_file()}
