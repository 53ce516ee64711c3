"""The output-path guard every writer goes through (contracts/plumbing/outputs.py), on real files
and real processes: never onto an input, keep what a replaced file was, create no folders, leave
nothing half-written or hidden behind on a signal or a full disk, fail in one line."""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import forked_cli
import pytest
from conftest import OWN_TRACES, PUBLIC, REPO, interruptible

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.plumbing import outputs

SQLITE_GZ = OWN_TRACES / "workload-dense-eager" / "trace.sqlite.gz"
KINETO = (
    PUBLIC / "kineto" / "tracelens_mi300x_sglang_qwen3-8b_decode.json.gz"
)  # 36 KB: fast to break down


@pytest.fixture(autouse=True)
def _forget_inputs():
    yield
    outputs.unprotect_all()


def cli(
    *args: str, cwd: Path, stdout=subprocess.PIPE, preexec_fn=None
) -> subprocess.CompletedProcess:
    """A process forked from one that has imported the CLI (``forked_cli``); a fresh one where
    ``preexec_fn`` has to run before it starts."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    if preexec_fn is None:
        return forked_cli.run(args, stdout=stdout, text=True, env=env, cwd=cwd, timeout=240)
    return subprocess.run(
        [sys.executable, "-m", "verifyprof.cli", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
        timeout=240,
        preexec_fn=preexec_fn,
    )


def one_line_error(done: subprocess.CompletedProcess, *needles: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("verifyprof: error: "), done.stderr
    assert "Traceback" not in done.stderr
    for needle in needles:
        assert needle in lines[0]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def hidden_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.startswith("."))


# --- never onto an input -------------------------------------------------------------------


@pytest.mark.parametrize(
    "spelling", ["same", "dot-slash", "absolute", "symlink", "hard link", "other dir"]
)
def test_an_input_is_refused_as_output_however_it_is_spelled(tmp_path, monkeypatch, spelling):
    trace = tmp_path / "trace.sqlite.gz"
    shutil.copyfile(SQLITE_GZ, trace)
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.gz").symlink_to(trace.name)
    os.link(trace, tmp_path / "hard.gz")
    monkeypatch.chdir(tmp_path)
    outputs.protect(["trace.sqlite.gz"])
    out = {
        "same": "trace.sqlite.gz",
        "dot-slash": "./trace.sqlite.gz",
        "absolute": str(trace),
        "symlink": "link.gz",
        "hard link": "hard.gz",
        "other dir": "sub/../trace.sqlite.gz",
    }[spelling]
    with pytest.raises(VerifyprofError, match="is an input of this command"):
        outputs.write_text(out, "overwritten")
    assert digest(trace) == digest(SQLITE_GZ)


@pytest.mark.parametrize(
    "source, option, spelling",
    [
        (SQLITE_GZ, "--csv", "{name}"),
        (SQLITE_GZ, "--parquet", "./{name}"),
        (SQLITE_GZ, "--csv", "link-to-trace"),
        (KINETO, "--csv", "{name}"),
        (KINETO, "--parquet", "{dir}/{name}"),
    ],
)
def test_breakdown_never_overwrites_its_trace(tmp_path, source, option, spelling):
    trace = tmp_path / source.name
    shutil.copyfile(source, trace)
    (tmp_path / "link-to-trace").symlink_to(trace)
    before = digest(trace), trace.stat().st_mtime_ns
    done = cli(
        "breakdown",
        trace.name,
        option,
        spelling.format(name=trace.name, dir=tmp_path),
        cwd=tmp_path,
    )
    one_line_error(done, f"{option} would overwrite an input of this command (the trace")
    assert (digest(trace), trace.stat().st_mtime_ns) == before


def test_an_output_in_the_folder_of_a_directory_input_is_allowed_unless_it_is_a_trace(tmp_path):
    shutil.copyfile(KINETO, tmp_path / KINETO.name)
    one_line_error(
        cli("breakdown", ".", "--whole-trace", "--csv", KINETO.name, cwd=tmp_path),
        "--csv would overwrite an input of this command (the folder's trace)",
    )
    done = cli("breakdown", ".", "--whole-trace", "--csv", "steps.csv", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "steps.csv").read_text().startswith("index,")


# --- what the target was ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o600, 0o664])
def test_a_replaced_file_keeps_its_mode(tmp_path, mode):
    out = tmp_path / "report.json"
    out.write_text("old")
    out.chmod(mode)
    outputs.write_json(out, {"new": 1})
    assert stat.S_IMODE(out.stat().st_mode) == mode
    assert out.read_text() == '{\n  "new": 1\n}\n'


@pytest.mark.parametrize("umask, expected", [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_a_new_file_gets_the_umask_default_mode(tmp_path, umask, expected):
    previous = os.umask(umask)
    try:
        outputs.write_text(tmp_path / "new.csv", "a,b\n")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "new.csv").stat().st_mode) == expected


def test_a_symlink_output_is_written_through_and_stays_a_link(tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "steps.csv"
    target.write_text("old")
    target.chmod(0o640)
    link = tmp_path / "steps.csv"
    link.symlink_to(target)
    outputs.write_text(link, "new")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert hidden_files(tmp_path) == [] and hidden_files(tmp_path / "real") == []


def test_a_dangling_symlink_output_creates_its_target(tmp_path):
    link = tmp_path / "out.csv"
    link.symlink_to(tmp_path / "made.csv")
    outputs.write_text(link, "x")
    assert link.is_symlink() and (tmp_path / "made.csv").read_text() == "x"


def test_a_symlink_loop_is_one_error(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(VerifyprofError, match="symbolic link loop"):
        outputs.write_text(tmp_path / "a", "x")


def test_a_directory_output_is_refused(tmp_path):
    with pytest.raises(VerifyprofError, match="is a directory"):
        outputs.write_text(tmp_path, "x")


# --- no folders made ---------------------------------------------------------------------


def test_a_missing_parent_folder_is_an_error_and_is_not_created(tmp_path):
    out = tmp_path / "missing" / "deeper" / "x.csv"
    with pytest.raises(VerifyprofError, match="no such directory"):
        outputs.write_text(out, "x")
    assert not (tmp_path / "missing").exists()


def test_breakdown_csv_into_a_missing_folder_is_one_line(tmp_path):
    done = cli(
        "breakdown",
        str(KINETO),
        "--whole-trace",
        "--csv",
        "/nonexistent-verifyprof/x.csv",
        cwd=tmp_path,
    )
    one_line_error(done, "/nonexistent-verifyprof/x.csv", "no such directory")
    assert not Path("/nonexistent-verifyprof").exists()


# --- signals and full disks --------------------------------------------------------------

WRITER = textwrap.dedent("""
    import sys, time
    from verifyprof.contracts.plumbing import outputs
    with outputs.atomic_path(sys.argv[1]) as tmp:
        tmp.write_text("half a report")
        print("writing", flush=True)
        time.sleep(60)
""")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_mid_write_leaves_no_temp_file_and_the_old_file_intact(tmp_path, sig):
    out = tmp_path / "steps.csv"
    out.write_text("the good old report")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(out)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout.readline().strip() == "writing"
    assert len(hidden_files(tmp_path)) == 1  # the temp file exists while writing
    proc.send_signal(sig)
    assert proc.wait(timeout=30) == -sig  # it still dies of the signal, as a shell expects
    assert hidden_files(tmp_path) == []
    assert out.read_text() == "the good old report"


def test_ctrl_c_mid_write_leaves_no_temp_file(tmp_path):
    out = tmp_path / "steps.csv"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=interruptible,
    )
    assert proc.stdout.readline().strip() == "writing"
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    assert hidden_files(tmp_path) == [] and not out.exists()


@pytest.mark.parametrize("option", ["--csv", "--parquet"])
def test_disk_full_on_a_file_output_is_one_line(tmp_path, option):
    one_line_error(
        cli("breakdown", str(KINETO), "--whole-trace", option, "/dev/full", cwd=tmp_path),
        "/dev/full",
        "No space left on device",
    )


@pytest.mark.parametrize(
    "command",
    [
        ["breakdown", str(KINETO), "--whole-trace", "--json"],
        ["kernels", str(KINETO), "--json"],
        ["whatif", "--verify-ms", "10", "--accept-len", "2", "--json"],
    ],
)
def test_disk_full_on_json_stdout_is_one_line(tmp_path, command):
    with open("/dev/full", "w") as full:
        done = cli(*command, cwd=tmp_path, stdout=full)
    one_line_error(done, "standard output", "No space left on device")


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (256, 256))
    signal.signal(
        signal.SIGXFSZ, signal.SIG_IGN
    )  # writes past the limit fail with EFBIG, like ENOSPC


def test_a_write_failing_midway_leaves_the_old_file_and_no_temp_file(tmp_path):
    out = tmp_path / "steps.csv"
    out.write_text("the good old report")
    done = cli(
        "breakdown",
        str(KINETO),
        "--whole-trace",
        "--csv",
        str(out),
        cwd=tmp_path,
        preexec_fn=_limit_file_size,
    )
    one_line_error(done, str(out), "cannot write")
    assert out.read_text() == "the good old report"
    assert hidden_files(tmp_path) == []
