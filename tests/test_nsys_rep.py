""".nsys-rep handling: export once with nsys, cache beside the report while it is unchanged.

Without nsys the error names the file and the command to run elsewhere. The cache behaviour is
exercised through the real subprocess path with a stand-in ``nsys`` executable that writes a
real public export (this machine has no Nsight Systems); with real nsys and a captured report
in ``traces/``, the last test runs the real export.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import (
    PUBLIC,  # tests/data/public: copies of the shared public traces
    in_threads,
)

from verifyprof.contracts.errors import ToolMissingError, TraceError
from verifyprof.trace import load_trace
from verifyprof.trace.nsys.reader import read_nsys_sqlite
from verifyprof.trace.nsys.report_cache import CACHE_DIR, NSYS_ENV, sqlite_for_report

REPO = Path(__file__).resolve().parents[1]

EXPORT = PUBLIC / "nsys/nsysai_mock_rtx3080_nsys2026.1.sqlite"
needs_public = pytest.mark.public_traces

STAND_IN = textwrap.dedent("""\
    #!{python}
    # Stand-in for `nsys export --type sqlite ... -o OUT REPORT`: writes a real export, logs the
    # call.
    import os, shutil, sys, time
    args = sys.argv[1:]
    with open(os.environ["STAND_IN_LOG"], "a") as log:
        log.write(" ".join(args) + "\\n")
    if os.environ.get("STAND_IN_FAIL"):
        print("ERROR: report file is corrupted", file=sys.stderr)
        sys.exit(1)
    if os.environ.get("STAND_IN_OLD") and "--include-blobs=true" in args:
        print("unrecognised option '--include-blobs=true'", file=sys.stderr)
        sys.exit(1)
    assert args[:3] == ["export", "--type", "sqlite"], args
    out = args[args.index("-o") + 1]
    if os.environ.get("STAND_IN_HANG"):  # a hung nsys, with a helper child of its own
        import subprocess, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open(os.environ["STAND_IN_HANG"], "w").write(str(child.pid))
        time.sleep(600)
    time.sleep(float(os.environ.get("STAND_IN_SLOW", "0")))
    data = open(os.environ["STAND_IN_EXPORT"], "rb").read()
    if os.environ.get("STAND_IN_TRUNCATE"):  # exit 0, but the file is cut off
        data = data[: len(data) // 2]
    open(out, "wb").write(data)
    """)


def fingerprint(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


@pytest.fixture
def report(tmp_path: Path) -> Path:
    """A report file (its bytes are never read by verifyprof itself, only by nsys)."""
    path = tmp_path / "run" / "capture.nsys-rep"
    path.parent.mkdir()
    path.write_bytes(b"\x00NSYS-REP stand-in report\x00" * 64)
    return path


@pytest.fixture
def no_nsys(monkeypatch, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv(NSYS_ENV, raising=False)


@pytest.fixture
def stand_in(monkeypatch, tmp_path: Path) -> Path:
    """A stand-in nsys on VERIFYPROF_NSYS; returns its call log."""
    binary = tmp_path / "bin" / "nsys"
    binary.parent.mkdir()
    binary.write_text(STAND_IN.format(python=sys.executable))
    binary.chmod(0o755)
    log = tmp_path / "nsys-calls.log"
    log.write_text("")
    monkeypatch.setenv(NSYS_ENV, str(binary))
    monkeypatch.setenv("STAND_IN_LOG", str(log))
    monkeypatch.setenv("STAND_IN_EXPORT", str(EXPORT))
    monkeypatch.setenv("VERIFYPROF_CACHE", str(tmp_path / "user-cache"))
    return log


def calls(log: Path) -> int:
    return len(log.read_text().splitlines())


# --- no nsys ---------------------------------------------------------------------------------


def test_report_without_nsys_names_the_file_and_the_export_command(report, no_nsys):
    before = fingerprint(report)
    with pytest.raises(ToolMissingError) as info:
        sqlite_for_report(report)
    message = str(info.value)
    assert message.startswith(f"{report}: ") and "\n" not in message
    assert "nsys" in message and "not on PATH" in message
    assert f"nsys export --type sqlite -o {report.with_suffix('.sqlite')} {report}" in message
    assert fingerprint(report) == before
    assert not (report.parent / CACHE_DIR).exists()


def test_report_with_a_bad_verifyprof_nsys_says_so(report, monkeypatch, tmp_path):
    monkeypatch.setenv(NSYS_ENV, str(tmp_path / "nowhere" / "nsys"))
    with pytest.raises(
        ToolMissingError, match=f"{NSYS_ENV}=.*is not an executable nsys.*nsys export --type sqlite"
    ):
        sqlite_for_report(report)


def test_load_trace_on_a_report_without_nsys_raises_tool_missing(report, no_nsys):
    with pytest.raises(ToolMissingError):
        load_trace(report)


def test_cli_report_without_nsys_exits_2_with_one_line(report, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != NSYS_ENV}
    env["PATH"] = str(tmp_path)  # no nsys here
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    before = fingerprint(report)
    done = subprocess.run(
        [sys.executable, "-m", "verifyprof.cli", "breakdown", str(report)],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert str(report) in lines[0] and "nsys export --type sqlite -o" in lines[0]
    assert fingerprint(report) == before


def test_missing_report_is_a_trace_error(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        sqlite_for_report(tmp_path / "absent.nsys-rep")


# --- the export cache (stand-in nsys) -------------------------------------------------------------


@needs_public
def test_first_use_exports_beside_the_report(report, stand_in):
    before = fingerprint(report)
    sqlite = sqlite_for_report(report)
    assert sqlite == report.parent / CACHE_DIR / "capture.nsys-rep.sqlite"
    assert calls(stand_in) == 1
    assert len(read_nsys_sqlite(sqlite).kernels) == 2  # the real export the stand-in wrote
    assert fingerprint(report) == before


@needs_public
def test_export_asks_for_nvtx_payload_blobs_first(report, stand_in):
    sqlite_for_report(report)
    assert "--include-blobs=true" in stand_in.read_text().splitlines()[0]


def test_an_nsys_without_include_blobs_falls_back_to_the_plain_export(
    report, stand_in, monkeypatch
):
    monkeypatch.setenv("STAND_IN_OLD", "1")
    out = sqlite_for_report(report)
    assert out.is_file()
    tried = stand_in.read_text().splitlines()
    assert len(tried) == 2 and "--include-blobs=true" not in tried[1]


def test_export_is_reused_while_the_report_is_unchanged(report, stand_in):
    first = sqlite_for_report(report)
    second = sqlite_for_report(report)
    assert first == second and calls(stand_in) == 1


@needs_public
def test_changed_report_is_exported_again(report, stand_in):
    sqlite_for_report(report)
    stat = report.stat()
    os.utime(report, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    sqlite_for_report(report)
    assert calls(stand_in) == 2


@needs_public
def test_cache_without_its_sidecar_is_not_trusted(report, stand_in):
    sqlite = sqlite_for_report(report)
    sqlite.with_name(sqlite.name + ".json").unlink()
    sqlite_for_report(report)
    assert calls(stand_in) == 2


@needs_public
def test_unwritable_report_directory_falls_back_to_the_user_cache(report, stand_in, tmp_path):
    (report.parent / CACHE_DIR).write_text("a file where the cache directory would go")
    sqlite = sqlite_for_report(report)
    assert sqlite.parent == tmp_path / "user-cache"
    assert sqlite.name.startswith("capture-") and sqlite.suffix == ".sqlite"
    assert sqlite_for_report(report) == sqlite and calls(stand_in) == 1


@needs_public
def test_failed_export_leaves_no_cache_and_says_why(report, stand_in, monkeypatch):
    monkeypatch.setenv("STAND_IN_FAIL", "1")
    with pytest.raises(TraceError, match=r"nsys export failed \(ERROR: report file is corrupted\)"):
        sqlite_for_report(report)
    leftovers = list((report.parent / CACHE_DIR).iterdir())
    assert leftovers == []


@needs_public
def test_load_trace_reads_a_report_through_its_export(report, stand_in):
    trace = load_trace(report)
    assert trace.source == [report] and len(trace.kernels) == 2


# --- real nsys, where there is one (the GPU machine: source .device/nsys-env.sh) ------------------

TINY_CUDA = """
import torch
torch.cuda.nvtx.range_push("verifyprof.verify bs=1")
x = torch.ones(1024, device="cuda")
y = (x * 2).sum()
torch.cuda.nvtx.range_pop()
print(float(y))
"""


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.skipif(
    shutil.which("nsys") is None or not _cuda_available(),
    reason="needs nsys on PATH and a CUDA GPU",
)
def test_real_nsys_captures_exports_and_reads_a_report(tmp_path, monkeypatch):
    monkeypatch.delenv(NSYS_ENV, raising=False)
    monkeypatch.setenv("VERIFYPROF_CACHE", str(tmp_path / "user-cache"))
    script = tmp_path / "tiny.py"
    script.write_text(TINY_CUDA)
    subprocess.run(
        [
            "nsys",
            "profile",
            "--trace=cuda,nvtx",
            "--force-overwrite",
            "true",
            "-o",
            str(tmp_path / "tiny"),
            sys.executable,
            str(script),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    report = tmp_path / "tiny.nsys-rep"
    before = fingerprint(report)
    sqlite = sqlite_for_report(report)
    trace = read_nsys_sqlite(sqlite)
    trace.validate()
    assert len(trace.kernels) >= 2
    assert "verifyprof.verify bs=1" in set(trace.names("ranges"))
    assert sqlite_for_report(report) == sqlite  # cached
    assert fingerprint(report) == before


# --- what the cache stores, and who exports -------------------------------------------------------


def test_an_export_that_exits_0_with_a_truncated_file_is_refused_and_not_cached(
    report, stand_in, monkeypatch
):
    monkeypatch.setenv("STAND_IN_TRUNCATE", "1")
    with pytest.raises(TraceError, match="exited 0 but wrote an incomplete SQLite file") as info:
        sqlite_for_report(report)
    assert str(info.value).startswith(f"{report}: ")
    assert list((report.parent / CACHE_DIR).iterdir()) == []
    monkeypatch.delenv("STAND_IN_TRUNCATE")
    assert (
        sqlite_for_report(report).stat().st_size == EXPORT.stat().st_size
    )  # the next run exports again


def test_a_cached_export_damaged_later_is_exported_again(report, stand_in):
    target = sqlite_for_report(report)
    size = target.stat().st_size
    with open(target, "r+b") as handle:  # same size, header no longer an SQLite one
        handle.write(b"garbage!" * 4)
    assert sqlite_for_report(report).stat().st_size == size
    assert calls(stand_in) == 2


def test_concurrent_runs_on_one_report_export_it_once(report, stand_in, monkeypatch):

    monkeypatch.setenv("STAND_IN_SLOW", "1")
    results, errors = in_threads(lambda: sqlite_for_report(report), 3)
    assert not errors and len(set(results)) == 1
    assert calls(stand_in) == 1  # one export (with blobs), shared by all three runs
    assert sorted(p.name for p in (report.parent / CACHE_DIR).iterdir()) == [
        f"{report.name}.sqlite",
        f"{report.name}.sqlite.json",
    ]


@pytest.mark.timeout(60)
def test_a_hanging_nsys_is_killed_with_its_children_after_the_timeout(
    report, stand_in, monkeypatch, tmp_path
):
    child_pid = tmp_path / "child.pid"
    monkeypatch.setenv("STAND_IN_HANG", str(child_pid))
    monkeypatch.setenv("VERIFYPROF_NSYS_EXPORT_TIMEOUT", "3")
    with pytest.raises(TraceError, match="did not finish within 3 s"):
        sqlite_for_report(report)
    pid = int(child_pid.read_text())
    for _ in range(300):  # up to 30 s: a loaded CI machine reaps slowly
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        if _is_zombie(
            pid
        ):  # dead; left unreaped where this test process is a subreaper (capture tests)
            break
        import time

        time.sleep(0.1)
    else:
        pytest.fail(f"nsys's child {pid} outlived the timeout")
    assert list((report.parent / CACHE_DIR).iterdir()) == []


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
