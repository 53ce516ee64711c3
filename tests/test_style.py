"""The code stays as ``ruff`` left it: lint clean (E, F, W, I at line length 100) and formatted.

The settings are pyproject.toml's ``[tool.ruff]``; ruff runs as this interpreter's module, so the
version is the one the ``test`` extra installs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ("verifyprof", "tests", "bench", "scripts")


def ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, *CHECKED],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def test_ruff_check_is_clean():
    done = ruff("check", "--no-cache")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_leaves_every_file_unchanged():
    done = ruff("format", "--check", "--no-cache")
    assert done.returncode == 0, done.stdout + done.stderr
