"""How a capture ends, with real processes: it waits for the program, not for what the program
left running in the background (that is stopped, and said in one line)."""

from __future__ import annotations

import time

from capture_helpers import (
    assert_nothing_left,
    read_manifest,
    run_capture,
)

LEFTOVER_LINE = "verifyprof: the program exited, leaving 1 process(es) running (pid "


def leftover_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "exited, leaving" in line]


def test_capture_waits_for_the_program_not_its_background_child(tmp_path, tag):
    out = tmp_path / "cap"
    started = time.monotonic()
    done = run_capture(
        ["--backend", "none", "--out", str(out), "--", "sh", "-c", "sleep 1000 & exit 0"],
        tag,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 30
    (line,) = leftover_lines(done.stderr)
    assert line.startswith(LEFTOVER_LINE) and line.endswith("): stopped with SIGTERM")
    assert read_manifest(out)["status"] == "ok"
    assert_nothing_left(tag)


def test_a_leftover_that_ignores_sigterm_gets_sigkill(tmp_path, tag):
    out = tmp_path / "cap"
    program = "(trap '' TERM; exec sleep 1000) & exit 0"
    done = run_capture(["--backend", "none", "--out", str(out), "--", "sh", "-c", program], tag)
    assert done.returncode == 0, done.stderr
    (line,) = leftover_lines(done.stderr)
    assert line.startswith(LEFTOVER_LINE) and line.endswith("): stopped with SIGTERM, then SIGKILL")
    assert_nothing_left(tag)


def test_a_baseline_run_that_leaves_a_child_is_stopped_before_the_profiled_run(tmp_path, tag):
    out = tmp_path / "cap"
    args = ["--backend", "none", "--baseline-run", "--out", str(out), "--"]
    done = run_capture([*args, "sh", "-c", "sleep 1000 & exit 0"], tag, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = leftover_lines(done.stderr)
    assert [line.split(",")[0] for line in lines] == [
        "verifyprof: the baseline run exited",
        "verifyprof: the program exited",
    ]
    assert_nothing_left(tag)
