"""`verifyprof capture` under hostile input and signals, with real processes: bad options are
refused before anything starts, nothing the target starts outlives the capture (not even a
daemon that calls setsid and clears its environment), SIGHUP and SIGQUIT clean up like SIGTERM,
and external tools cannot hang it."""

from __future__ import annotations

import os
import signal
import stat
import sys
import textwrap
import time
from pathlib import Path

import pytest
from capture_helpers import (
    assert_nothing_left,
    fake_server_cmd,
    free_port,
    read_manifest,
    run_capture,
    signal_when_logged,
    start_capture,
    tagged_processes,
)

from verifyprof.capture import nsys
from verifyprof.contracts.errors import VerifyprofError


def one_line_error(proc, *needles: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert (
        len(lines) == 1
        and lines[0].startswith("verifyprof: error: ")
        and "Traceback" not in proc.stderr
    ), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


# --- options refused up front ------------------------------------------------------------

SERVER = ["--server-cmd", fake_server_cmd(), "--backend", "none", "--hooks", "none"]
PROGRAM = ["--backend", "none", "--", sys.executable, "-c", "pass"]


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--health-timeout", "nan", *SERVER],
            "--health-timeout must be a finite number of seconds > 0, not nan",
        ),
        (
            ["--health-timeout", "inf", *SERVER],
            "--health-timeout must be a finite number of seconds > 0, not inf",
        ),
        (
            ["--health-timeout", "-1", *SERVER],
            "--health-timeout must be a finite number of seconds > 0, not -1",
        ),
        (
            ["--health-timeout", "0", *SERVER],
            "--health-timeout must be a finite number of seconds > 0",
        ),
        (
            ["--stop-timeout", "nan", *PROGRAM],
            "--stop-timeout must be a finite number of seconds >= 0, not nan",
        ),
        (
            ["--stop-timeout", "inf", *PROGRAM],
            "--stop-timeout must be a finite number of seconds >= 0, not inf",
        ),
        (
            ["--stop-timeout", "-1", *PROGRAM],
            "--stop-timeout must be a finite number of seconds >= 0",
        ),
        (["--stop-timeout", "1e9", *PROGRAM], "--stop-timeout 1e+09 s is more than a week"),
        (["--temperature", "nan", *SERVER], "--temperature must be a finite number >= 0"),
        (["--port", "0", *SERVER], "--port must be a TCP port, 1 to 65535, not 0"),
        (["--port", "70000", *SERVER], "--port must be a TCP port, 1 to 65535, not 70000"),
        (
            ["--server-cmd", fake_server_cmd("--port", "99999"), "--backend", "none"],
            "--port in --server-cmd must be a TCP port",
        ),
        (
            ["--server-cmd", "python -c 'unclosed", "--backend", "none"],
            "--server-cmd cannot be split into arguments: No closing quotation",
        ),
        (
            ["--server-cmd", "no-such-server-binary --port 1", "--backend", "none"],
            "command 'no-such-server-binary' not found on the PATH",
        ),
        (["--backend", "none", "--", "/etc/hostname"], "/etc/hostname: the program: not"),
        (
            ["--backend", "none", "--", "/no/such/program"],
            "/no/such/program: the program: no such file",
        ),
        (
            ["--backend", "none", "--", "no-such-program-verifyprof"],
            "command 'no-such-program-verifyprof' not found",
        ),
    ],
)
def test_bad_options_are_one_line_before_anything_starts(tmp_path, tag, args, message):
    out = tmp_path / "cap"
    proc = run_capture(["--out", str(out), *args], tag, timeout=60)
    one_line_error(proc, message)
    assert not out.exists()
    assert_nothing_left(tag)


def test_out_below_a_file_is_one_line_and_creates_nothing(tmp_path, tag):
    afile = tmp_path / "afile"
    afile.write_text("x")
    proc = run_capture(["--out", str(afile / "sub"), *PROGRAM], tag, timeout=60)
    one_line_error(proc, f"{afile} is not a directory")
    assert afile.read_text() == "x"


def test_a_text_file_marked_executable_is_not_a_program(tmp_path, tag):
    script = tmp_path / "notes.txt"
    script.write_text("just text\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    proc = run_capture(
        ["--out", str(tmp_path / "cap"), "--backend", "none", "--", str(script)], tag, timeout=60
    )
    one_line_error(proc, "neither an ELF binary nor a script starting with #!")


# --- nothing outlives the capture ----------------------------------------------------------

# Starts a daemon the classic way: fork, setsid, fork again, parent exits, exec with an empty
# environment (so no VERIFYPROF_RUN_ID and no test tag): without a subreaper it is init's.
ESCAPER = textwrap.dedent("""
    import os, sys, time
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.close(r)
            os.write(w, str(os.getpid()).encode())
            os.close(w)
            os.execve("/bin/sleep", ["sleep", "600"], {})
        os._exit(0)
    os.close(w)
    pid = os.read(r, 32).decode()
    open(sys.argv[1], "w").write(pid)
    print("daemon", pid, flush=True)
    time.sleep(float(sys.argv[2]))
""")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.fixture
def daemon_pid(tmp_path):
    """The escaper's daemon pid (read after the capture); killed at teardown if a test fails."""
    path = tmp_path / "daemon.pid"
    yield path
    if path.exists():
        pid = int(path.read_text())
        if _alive(pid) and "sleep" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(
            errors="replace"
        ):
            os.kill(pid, signal.SIGKILL)


def _gone(pid: int, grace: float = 5.0) -> bool:
    deadline = time.monotonic() + grace
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="PR_SET_CHILD_SUBREAPER is Linux's"
)
def test_a_setsid_daemon_with_a_cleared_environment_does_not_outlive_the_capture(
    tmp_path, tag, daemon_pid
):
    out = tmp_path / "cap"
    proc = run_capture(
        [
            "--out",
            str(out),
            "--backend",
            "none",
            "--",
            sys.executable,
            "-c",
            ESCAPER,
            str(daemon_pid),
            "0.3",
        ],
        tag,
    )
    assert proc.returncode == 0, proc.stderr
    pid = int(daemon_pid.read_text())
    assert _gone(pid), f"daemon {pid} outlived the capture"
    doc = read_manifest(out)
    assert doc["status"] == "ok" and doc["target"]["leftover_pids"] == []
    assert_nothing_left(tag)


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGQUIT, signal.SIGTERM])
def test_sighup_and_sigquit_clean_up_like_sigterm(tmp_path, tag, daemon_pid, sig):
    out = tmp_path / "cap"
    capture = start_capture(
        [
            "--out",
            str(out),
            "--backend",
            "none",
            "--",
            sys.executable,
            "-c",
            ESCAPER,
            str(daemon_pid),
            "600",
        ],
        tag,
    )

    def both_running() -> None:
        assert len(tagged_processes(tag)) >= 2  # verifyprof and the program (the daemon has no tag)

    stderr = signal_when_logged(capture, out / "program.log", "daemon", sig, before=both_running)
    assert capture.returncode == 128 + sig, stderr
    doc = read_manifest(out)
    assert doc["status"] == "interrupted" and doc["error"] == f"interrupted ({sig.name})"
    assert doc["finished_at"] is not None
    assert _gone(int(daemon_pid.read_text()))
    assert_nothing_left(tag)


def test_sighup_mid_server_capture_stops_the_server_and_its_scheduler(tmp_path, tag):
    out = tmp_path / "cap"
    args = [
        "--server-cmd",
        fake_server_cmd("--step-ms", "20"),
        "--port",
        str(free_port()),
        "--backend",
        "torch",
        "--requests",
        "200",
        "--out",
        str(out),
    ]
    capture = start_capture(args, tag)
    signal_when_logged(capture, out / "server.log", '"POST /generate', signal.SIGHUP, count=3)
    assert capture.returncode == 128 + signal.SIGHUP
    doc = read_manifest(out)
    assert doc["status"] == "interrupted" and doc["error"] == "interrupted (SIGHUP)"
    assert_nothing_left(tag)


# --- external tools time out ---------------------------------------------------------------

HANGING_NSYS = """#!{python}
import subprocess, sys, time
if sys.argv[1:2] == ["--version"] or sys.argv[1:2] == ["export"]:
    subprocess.Popen(["sleep", "600"])  # a helper in its group, as real tools have
    time.sleep(600)
"""


@pytest.fixture
def hanging_nsys(tmp_path, monkeypatch, tag):
    monkeypatch.setenv("VERIFYPROF_TEST_TAG", tag)  # so its processes can be found and counted
    path = tmp_path / "nsys"
    path.write_text(HANGING_NSYS.format(python=sys.executable))
    path.chmod(0o755)
    return path


def test_a_hanging_nsys_export_times_out_and_leaves_no_process_or_partial_file(
    tmp_path, tag, hanging_nsys
):
    report = tmp_path / "capture.nsys-rep"
    report.write_bytes(b"report")
    started = time.monotonic()
    with pytest.raises(VerifyprofError, match="nsys export did not finish in 1 s"):
        nsys.export_sqlite(
            hanging_nsys, report, tmp_path / "capture.sqlite", tmp_path / "export.log", timeout=1.0
        )
    assert time.monotonic() - started < 20
    assert_nothing_left(tag)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["capture.nsys-rep", "export.log", "nsys"]


def test_a_hanging_nsys_version_gives_none_in_time(tag, hanging_nsys):
    started = time.monotonic()
    assert nsys.nsys_version(hanging_nsys, timeout=1.0) is None
    assert time.monotonic() - started < 20
    assert_nothing_left(tag)
