"""An output that is the command's own standard output (``-``, ``/dev/stdout``,
``/proc/self/fd/1``, or the very file stdout is redirected to) gets stdout alone: the file's
bytes and nothing else, no tables mixed in. Two things that both want stdout are refused before
anything is read. Real CLI processes on a real trace."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import forked_cli
import pandas as pd
import pytest
from conftest import PUBLIC

KINETO = PUBLIC / "kineto" / "tracelens_mi300x_sglang_qwen3-8b_decode.json.gz"
BREAKDOWN = ["breakdown", str(KINETO), "--whole-trace"]


def cli(*args: str, stdout=subprocess.PIPE, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The CLI in ``cwd`` (a test's own folder: a ``-`` taken for a file name lands there), a
    process forked from one that has imported it (``forked_cli``)."""
    return forked_cli.run(args, stdout=stdout, timeout=240, cwd=cwd)


@pytest.fixture(scope="module")
def csv_bytes(tmp_path_factory) -> bytes:
    """What ``--csv FILE`` writes: the bytes stdout must carry, alone."""
    path = tmp_path_factory.mktemp("csv") / "steps.csv"
    done = cli(*BREAKDOWN, "--csv", str(path))
    assert done.returncode == 0, done.stderr
    return path.read_bytes()


@pytest.mark.parametrize("spelling", ["-", "/dev/stdout", "/proc/self/fd/1", "/dev/fd/1"])
def test_a_csv_to_stdout_is_the_csv_alone(tmp_path, csv_bytes, spelling):
    done = cli(*BREAKDOWN, "--csv", spelling, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == csv_bytes  # no table before or after it
    assert done.stderr.decode().strip() == f"wrote {spelling}"


def test_the_file_stdout_is_appended_to_gets_the_csv_after_what_it_held(tmp_path, csv_bytes):
    """``>> log`` and ``--csv log``: one file, opened once by the shell, written once through
    stdout where it stands (not truncated, not renamed over)."""
    log = tmp_path / "log.txt"
    log.write_bytes(b"earlier lines\n")
    with open(log, "ab") as out:
        done = cli(*BREAKDOWN, "--csv", str(log), stdout=out)
    assert done.returncode == 0, done.stderr
    assert log.read_bytes() == b"earlier lines\n" + csv_bytes


def test_a_parquet_to_stdout_is_a_parquet_file_alone(tmp_path):
    done = cli(*BREAKDOWN, "--parquet", "-", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert cli(*BREAKDOWN, "--parquet", str(tmp_path / "steps.parquet")).returncode == 0
    expected = pd.read_parquet(tmp_path / "steps.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(io.BytesIO(done.stdout)), expected)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--csv", "-", "--json"], "-: is standard output, where --json prints"),
        (
            ["--csv", "-", "--parquet", "/dev/stdout"],
            "/dev/stdout: is standard output, as - already is",
        ),
    ],
)
def test_two_things_on_stdout_are_refused_in_one_line_before_reading(tmp_path, args, message):
    done = cli(*BREAKDOWN, *args, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.decode().splitlines() == [
        f"verifyprof: error: {message}: write one of them to a file"
    ]


def test_a_csv_file_beside_a_piped_stdout_leaves_the_tables_on_stdout(tmp_path, csv_bytes):
    """Only an output that *is* stdout takes it: with a file output the tables stay there."""
    done = cli(*BREAKDOWN, "--csv", str(tmp_path / "steps.csv"))
    assert done.returncode == 0 and b"whole_trace" in done.stdout
    assert csv_bytes not in done.stdout
    assert (tmp_path / "steps.csv").read_bytes() == csv_bytes


def test_an_html_report_to_stdout_is_the_page_alone(tmp_path):
    page = tmp_path / "page.html"
    assert cli("report", str(KINETO), "--whole-trace", "-o", str(page)).returncode == 0
    done = cli("report", str(KINETO), "--whole-trace", "-o", "-", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == page.read_bytes()  # no "wrote - (5.0 MB)" after it
