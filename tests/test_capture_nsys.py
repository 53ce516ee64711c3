"""The nsys half of capture: every decision that needs no nsys binary is tested here; the last
test runs the whole nsys capture for real where nsys exists (the GPU machine)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest
from capture_helpers import (
    assert_nothing_left,
    fake_server_cmd,
    free_port,
    kill_tagged,
    new_tag,
    read_manifest,
    run_capture,
)

from verifyprof.capture import nsys
from verifyprof.capture.profile_window import profile_body
from verifyprof.capture.request import server_address
from verifyprof.contracts.errors import ToolMissingError, VerifyprofError


def test_profile_command_traces_cuda_and_nvtx_inside_the_cuda_profiler_range():
    cmd = nsys.profile_command(
        "/opt/nsys", ["python", "-m", "sglang.launch_server", "--port", "30000"], Path("/o/capture")
    )
    assert cmd == [
        "/opt/nsys",
        "profile",
        "-t",
        "cuda,nvtx",
        "--sample=none",
        "--cpuctxsw=none",
        "--trace-fork-before-exec=true",
        "--cuda-graph-trace=node",
        "--capture-range=cudaProfilerApi",
        "--capture-range-end=stop",
        "-o",
        "/o/capture",
        "-f",
        "true",
        "python",
        "-m",
        "sglang.launch_server",
        "--port",
        "30000",
    ]


def test_profile_command_with_osrt_and_whole_program():
    cmd = nsys.profile_command(
        "nsys", ["python", "x.py"], Path("out/capture"), osrt=True, capture_range=False
    )
    assert cmd[cmd.index("-t") + 1] == "cuda,nvtx,osrt"
    assert not any(arg.startswith("--capture-range") for arg in cmd)
    assert cmd[-2:] == ["python", "x.py"]


def test_report_and_export_paths():
    assert nsys.report_path(Path("/o/capture")) == Path("/o/capture.nsys-rep")
    assert nsys.export_command(
        "nsys", Path("/o/capture.nsys-rep"), Path("/o/.capture.partial.sqlite")
    ) == [
        "nsys",
        "export",
        "--type",
        "sqlite",
        "--include-blobs=true",
        "--force-overwrite",
        "true",
        "-o",
        "/o/.capture.partial.sqlite",
        "/o/capture.nsys-rep",
    ]
    # older nsys without --include-blobs: the plain export it falls back to
    assert "--include-blobs=true" not in nsys.export_command(
        "nsys", Path("r.nsys-rep"), Path("o.sqlite"), blobs=False
    )


def test_start_profile_body_for_nsys_uses_the_cuda_profiler_activity_only():
    assert profile_body("nsys", Path("/o"), None) == {"activities": ["CUDA_PROFILER"]}
    assert profile_body("nsys", Path("/o"), 20) == {
        "activities": ["CUDA_PROFILER"],
        "num_steps": 20,
    }


def test_start_profile_body_for_torch_writes_sglangs_traces_into_the_capture():
    body = profile_body("torch", Path("/o"), None)
    assert body == {
        "activities": ["CPU", "GPU"],
        "output_dir": "/o/torch",
        "with_stack": False,
        "record_shapes": False,
    }


def _executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_gzip_export_replaces_the_sqlite_with_a_complete_gzip(tmp_path):
    import gzip

    db = tmp_path / "capture.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("create table t (x)")
        conn.executemany("insert into t values (?)", [(i,) for i in range(1000)])
    content = db.read_bytes()
    target = nsys.gzip_export(db)
    assert target == tmp_path / "capture.sqlite.gz" and not db.exists()
    assert gzip.decompress(target.read_bytes()) == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["capture.sqlite.gz"]


def test_find_nsys_prefers_the_environment_variable(tmp_path):
    chosen = _executable(tmp_path / "my-nsys")
    assert nsys.find_nsys({"VERIFYPROF_NSYS": str(chosen), "PATH": ""}) == chosen


def test_find_nsys_uses_the_path(tmp_path):
    on_path = _executable(tmp_path / "nsys")
    assert nsys.find_nsys({"PATH": str(tmp_path)}) == on_path


def test_find_nsys_rejects_a_non_executable_environment_variable(tmp_path):
    plain = tmp_path / "nsys"
    plain.write_text("")
    with pytest.raises(
        ToolMissingError, match="VERIFYPROF_NSYS is set but is not an executable file"
    ) as err:
        nsys.find_nsys({"VERIFYPROF_NSYS": str(plain)})
    assert err.value.path == plain


@pytest.mark.skipif(
    any(nsys.glob.glob(p) for p in nsys._SEARCH), reason="nsys installed in a standard place"
)
def test_find_nsys_without_nsys_explains_how_to_get_it(tmp_path):
    with pytest.raises(ToolMissingError) as err:
        nsys.find_nsys({"PATH": str(tmp_path)})
    message = str(err.value)
    assert "nsys (Nsight Systems) not found" in message
    assert "VERIFYPROF_NSYS" in message and "--backend torch" in message and "\n" not in message


def test_missing_report_with_only_a_qdstrm_blames_the_importer(tmp_path):
    (tmp_path / "capture.qdstrm").write_bytes(b"raw")
    assert "libdw.so.1" in nsys.explain_missing_report(tmp_path / "capture")


def test_missing_report_without_anything_points_at_the_capture_range(tmp_path):
    assert "cudaProfilerStart" in nsys.explain_missing_report(tmp_path / "capture")


def test_server_port_is_taken_from_the_server_command():
    argv, host, port = server_address(
        ["python", "-m", "sglang.launch_server", "--port", "31000", "--host", "0.0.0.0"], None
    )
    assert (host, port) == ("127.0.0.1", 31000) and argv[-4:] == [
        "--port",
        "31000",
        "--host",
        "0.0.0.0",
    ]


def test_server_port_option_is_added_to_a_command_without_one():
    argv, host, port = server_address(["python", "-m", "sglang.launch_server"], 31001)
    assert argv == ["python", "-m", "sglang.launch_server", "--port", "31001"] and port == 31001


def test_server_port_defaults_to_sglangs():
    assert server_address(["python", "-m", "sglang.launch_server"], None)[2] == 30000


def test_conflicting_ports_are_refused():
    with pytest.raises(VerifyprofError, match="disagrees"):
        server_address(["srv", "--port=31000"], 31001)


# ---- the real thing, where nsys exists ----------------------------------------------------------


@pytest.mark.skipif(
    shutil.which("nsys") is None and not os.environ.get("VERIFYPROF_NSYS"),
    reason="needs nsys (GPU machine)",
)
def test_nsys_capture_of_the_fake_server_writes_report_sqlite_and_manifest(tmp_path):
    """On a GPU machine the fake server's scheduler runs its steps on the GPU and calls
    cudaProfilerStart/Stop for CUDA_PROFILER, so this is the full nsys path end to end."""
    tag = new_tag()
    out = tmp_path / "cap"
    try:
        proc = run_capture(
            [
                "--server-cmd",
                fake_server_cmd(),
                "--port",
                str(free_port()),
                "--backend",
                "nsys",
                "--hooks",
                "none",
                "--out",
                str(out),
                "--requests",
                "4",
                "--output-len",
                "20",
                "--warmup",
                "1",
            ],
            tag,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr
        doc = read_manifest(out)
        kinds = sorted(t["kind"] for t in doc["traces"])
        assert kinds == ["nsys-rep", "nsys-sqlite"], doc
        assert doc["versions"]["nsys"] and doc["command"]["profiler"][1] == "profile"
        with sqlite3.connect(f"file:{out / 'capture.sqlite'}?mode=ro", uri=True) as db:
            tables = {
                row[0] for row in db.execute("select name from sqlite_master where type='table'")
            }
        assert "CUPTI_ACTIVITY_KIND_KERNEL" in tables
        assert_nothing_left(tag)
    finally:
        kill_tagged(tag)


def test_a_program_that_never_opened_the_window_is_told_so_and_pointed_at_capture_all(tmp_path):
    message = nsys.explain_missing_report(tmp_path / "capture", mode="program")
    assert "never called cudaProfilerStart" in message and "--capture-all" in message
    assert "server" not in message and "/start_profile" not in message


def test_nsys_missing_for_a_program_suggests_backend_none_not_the_servers_torch_backend(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("VERIFYPROF_NSYS", raising=False)
    monkeypatch.setattr(nsys, "_SEARCH", ())
    from rich.console import Console

    from verifyprof.capture.request import CaptureOptions
    from verifyprof.capture.session import CaptureSession

    run = CaptureSession(
        CaptureOptions(out=tmp_path / "cap", program=["prog"]), Console(stderr=True)
    )
    with pytest.raises(ToolMissingError) as caught:
        run.setup()
    assert "--backend none" in str(caught.value) and "SGLang" not in str(caught.value)
