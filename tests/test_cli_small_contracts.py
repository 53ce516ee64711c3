"""The small contracts of issues 33 and 34, each on a real trace and a real process: outputs are
checked before any input is read; ``--width``/``--mode`` are refused where they pick nothing; a
part of the cycle chosen with ``--step`` is named for what it is; a name written back (``wrote``)
is escaped as an error message escapes it; a command that reads no trace needs no HOME."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import forked_cli
import pytest
import test_path_errors
from conftest import OWN_TRACES, REPO
from test_path_errors import one_line, run

locked = test_path_errors.locked  # the fixture that gives back the modes a test takes away

DENSE = OWN_TRACES / "workload-dense-eager" / "trace.sqlite.gz"


def cli(*args: object, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """A process forked from one that has imported the CLI (``forked_cli``)."""
    return forked_cli.run(
        [str(a) for a in args],
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=180,
    )


def commands_with(*options: str) -> list[str]:
    """The CLI's commands that take every one of ``options`` (read from the app)."""
    import typer

    from verifyprof.cli import app

    return sorted(
        name
        for name, command in typer.main.get_command(app).commands.items()
        if set(options) <= {o for p in command.params for o in p.opts}
    )


def base(command: str, trace: Path, out: Path) -> list[object]:
    return {
        "breakdown": ["breakdown", trace],
        "kernels": ["kernels", trace],
        "whatif": ["whatif", trace, "--accept-len", "2"],
        "compare": ["compare", trace, trace],
        "report": ["report", trace, "-o", out],
    }[command]


@pytest.mark.parametrize("command", commands_with("--whole-trace", "--mode"))
def test_mode_with_whole_trace_is_refused_in_one_line(tmp_path, command):
    """The whole trace is one step group: ``--mode`` would pick nothing (kernels refused it,
    breakdown and whatif took it). ``--width`` stays where a model reads it: the width of the
    whole trace's step, which the trace does not say (kernels, which models nothing, refuses
    it too)."""
    done = cli(*base(command, DENSE, tmp_path / "r.html"), "--whole-trace", "--mode", "eager")
    line = one_line(done, "--mode picks the verdict's step group: not with --whole-trace")
    assert not (tmp_path / "r.html").exists(), line


def test_a_draft_width_no_draft_step_has_names_the_draft_steps():
    """Not 'no verify steps': the verify steps are there; the draft's width is not."""
    line = one_line(cli("breakdown", DENSE, "--step", "draft", "--width", "1"))
    assert "no 'verifyprof.draft' steps of width 1" in line
    assert "the 'verifyprof.draft' steps have widths [3]" in line
    assert "verify steps" not in line


OUTPUTS = [("breakdown", "--csv"), ("breakdown", "--parquet"), ("report", "-o")]


@pytest.mark.parametrize(("command", "option"), OUTPUTS)
def test_an_output_that_cannot_be_written_is_refused_before_any_input_is_read(
    tmp_path, command, option
):
    """The input is no trace at all: had it been read first, the line would be about it
    (``report -o FOLDER`` read and analysed the whole trace, 2.6-3.8 s, before refusing)."""
    bogus = tmp_path / "trace.sqlite"
    bogus.write_bytes(b"not a trace, and never read " * 64)
    folder = tmp_path / "folder"
    folder.mkdir()
    args = [command, bogus, *([option, folder] if command != "report" else ["-o", folder])]
    line = one_line(cli(*args), f"{folder}: is a directory, expected a file to write")
    assert "not a trace" not in line


def test_the_wrote_line_escapes_the_name_as_an_error_message_does(tmp_path):
    name = tmp_path / "rows\n\x1b[2J.csv"
    done = cli("breakdown", DENSE, "--csv", name)
    assert done.returncode == 0, done.stderr
    assert f"wrote {tmp_path}/rows\\x0a\\x1b[2J.csv\n" in done.stderr
    assert "\x1b" not in done.stderr and name.is_file()


NO_TRACE = [
    ["--version"],
    ["whatif", "--verify-ms", "30", "--accept-len", "2"],
    *[[c, "--help"] for c in commands_with()],  # every command
]


@pytest.mark.parametrize("args", NO_TRACE, ids=" ".join)
def test_a_command_that_reads_no_trace_runs_with_a_home_that_cannot_be_searched(
    tmp_path, locked, args
):
    """Only a command that reads data files (ranges, taxonomy, hardware, models) needs them; the
    one line for those is test_path_errors' (kernels with the same HOME)."""
    config = tmp_path / ".config"
    config.mkdir()
    locked(config, 0)
    done = run(*args, env={"HOME": str(tmp_path), "VERIFYPROF_DATA_DIR": ""})
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr


def on_a_terminal(*args: object, cwd: Path = REPO) -> bytes:
    """Everything ``verifyprof ARGS`` draws on a terminal (a pseudo-terminal: the status line is
    drawn only there)."""
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "verifyprof.cli", *map(str, args)],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), "TERM": "xterm", "COLUMNS": "200"},
    )
    os.close(follower)
    drawn = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal's other end closed: the process is done
            break
        if not chunk:
            break
        drawn += chunk
    os.close(leader)
    assert proc.wait(timeout=180) == 0, drawn[-2000:]
    return drawn


def test_the_status_line_escapes_the_name_it_shows(tmp_path):
    """The status line quoted the trace's name raw: its ESC [ 2 J cleared the user's terminal,
    a byte that is not UTF-8 showed as '\\udcff'."""
    trace = tmp_path / os.fsdecode(b"t\377\x1b[2J.sqlite.gz")
    trace.write_bytes(DENSE.read_bytes())
    drawn = on_a_terminal("breakdown", trace.name, cwd=tmp_path)  # short: the line shows it all
    assert b"breaking down " in drawn  # the status line was drawn
    assert b"\x1b[2J" not in drawn and b"udcff" not in drawn
    assert b"t\\xff\\x1b[2J.sqlite.gz" in drawn


def test_a_skipped_file_is_named_escaped_in_its_warning(tmp_path):
    bad = tmp_path / os.fsdecode(b"bad\377\x1b.sqlite")
    bad.write_bytes(b"not a trace")
    done = subprocess.run(
        [sys.executable, "-m", "verifyprof.cli", "breakdown", str(DENSE), str(bad)],
        capture_output=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    warning = f"verifyprof: warning: {tmp_path}/bad\\xff\\x1b.sqlite: not a trace".encode()
    assert done.stderr.startswith(warning) and b"\x1b" not in done.stderr, done.stderr
