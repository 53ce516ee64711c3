"""Headless Chromium (Debian's ``chromium`` package) for the HTML report tests: the DOM after the
page's scripts ran, a screenshot, and the console messages, with the network off."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

WIDTH = 1400
CONSOLE = re.compile(
    r":CONSOLE[:(]\d+"
)  # chromium's log line of a console message (its level is not logged)


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: .ci/run installs Debian's chromium package")
        pytest.skip("chromium not installed (apt-get install chromium)")
    return found


@dataclass
class Page:
    dom: str
    log: str

    @property
    def console_messages(self) -> list[str]:
        """Every console message: uncaught errors, console.error/warn/log (the report logs
        nothing)."""
        return [line for line in self.log.splitlines() if CONSOLE.search(line)]


def _run(args: list[str], tmp: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    base = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--enable-logging=stderr",
        "--v=0",
        f"--user-data-dir={tmp / 'profile'}",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # no name resolves: offline
        "--virtual-time-budget=15000",
        "--run-all-compositor-stages-before-draw",
    ]
    return subprocess.run(base + args, capture_output=True, text=True, timeout=timeout, check=False)


def load(html: Path, tmp: Path, height: int = 2000) -> Page:
    """The DOM after load (scripts ran, charts drawn) and chromium's log (console messages
    included)."""
    proc = _run([f"--window-size={WIDTH},{height}", "--dump-dom", html.resolve().as_uri()], tmp)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return Page(dom=proc.stdout, log=proc.stderr)


def screenshot(html: Path, tmp: Path, height: int) -> Path:
    out = tmp / f"{html.stem}.png"
    proc = _run(
        [f"--window-size={WIDTH},{height}", f"--screenshot={out}", html.resolve().as_uri()], tmp
    )
    assert proc.returncode == 0 and out.is_file(), proc.stderr[-2000:]
    return out
