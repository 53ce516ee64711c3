"""Messages that say what is true (issue 29): a multi-line error keeps its lines (each line's
control characters escaped), a hook warning reads as the CLI's own warnings do, one Kineto file
with corrupt timestamps is named as that, and a program capture refuses a server's workload
options instead of ignoring them."""

from __future__ import annotations

import gzip
import json
import sys

import pytest
from capture_helpers import assert_nothing_left, run_capture
from cli_helpers import verifyprof
from conftest import PUBLIC

MI300X = PUBLIC / "kineto" / "tracelens_mi300x_sglang_qwen3-8b_decode.json.gz"


def test_a_failed_programs_log_tail_keeps_its_lines_and_escapes_each(tmp_path, tag):
    """Before: one line with a literal \\x0a at every break."""
    out = tmp_path / "cap"
    program = 'echo line one; printf "clear \\033[2J here\\n"; echo last; exit 3'
    done = run_capture(["--backend", "none", "--out", str(out), "--", "sh", "-c", program], tag)
    assert done.returncode == 1, done.stderr
    log = out / "program.log"
    error = done.stderr[done.stderr.index("verifyprof: error: ") :].splitlines()
    assert error == [
        f"verifyprof: error: program exited with code 3 (outputs kept in {out})",
        f"--- last 3 lines of {log} ---",
        "line one",
        "clear \\x1b[2J here",
        "last",
        f"--- end of {log} ---",
    ]
    assert_nothing_left(tag)


def test_a_path_with_a_line_break_stays_one_escaped_line(tmp_path):
    path = tmp_path / "two\nlines.json"
    path.write_text("{}")
    done = verifyprof("breakdown", str(path))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "two\\x0alines.json" in lines[0]


def test_a_hook_warning_is_one_line_in_the_clis_style(tmp_path, tag):
    """Before: Python's ``.../targets.py:111: HookWarning: ...`` and a source line of ours."""
    (tmp_path / "mod.py").write_text("def other():\n    pass\n")
    (tmp_path / "prog.py").write_text("import mod\nprint('ran')\n")
    out = tmp_path / "cap"
    done = run_capture(
        [
            "--backend",
            "none",
            "--out",
            str(out),
            "--hook",
            "mod:missing_fn=verify",
            "--allow-missing-hooks",
            "--",
            sys.executable,
            str(tmp_path / "prog.py"),
        ],
        tag,
    )
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "missing_fn" in line]
    assert warned[0] == (
        "verifyprof: warning: hook target mod:missing_fn not found (mod has no attribute"
        " 'missing_fn'); skipped"
    )
    assert "HookWarning" not in done.stderr and "warnings.warn" not in done.stderr


def test_one_kineto_file_with_corrupt_timestamps_is_named_as_such(tmp_path):
    """Before: ``neg.json: and neg.json were captured 122.5 days apart: not one run's rank
    files``, about a single file."""
    doc = json.loads(gzip.decompress(MI300X.read_bytes()))
    kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    kernel["ts"] = -1e13  # µs: one kernel 172 days before the others
    path = tmp_path / "neg.json"
    path.write_text(json.dumps(doc))
    done = verifyprof("breakdown", str(path), "--whole-trace")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"verifyprof: error: {path}: corrupt timestamps: its GPU work spans 172.6 days (one"
        " event's ts or dur is far off the others); not a trace as captured"
    ]


@pytest.mark.parametrize(
    "options, named",
    [
        (["--requests", "0"], "--requests: an option"),
        (["--concurrency", "-1"], "--concurrency: an option"),
        (["--port", "5", "--warmup", "3"], "--port, --warmup: options"),
        (["--prompts", "p.jsonl", "--output-len", "9"], "--output-len, --prompts: options"),
        (["--temperature", "1", "--health-timeout", "5"], "--temperature, --health-timeout"),
        (["--input-len", "4", "--unprofiled-requests", "2"], "--input-len, --unprofiled-req"),
    ],
)
def test_a_program_capture_refuses_a_servers_workload_options(tmp_path, options, named):
    out = tmp_path / "cap"
    done = verifyprof("capture", "--backend", "none", *options, "--out", str(out), "--", "true")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"verifyprof: error: {named}")
    assert "a program (after --) runs its own workload" in lines[0]
    assert not out.exists()
