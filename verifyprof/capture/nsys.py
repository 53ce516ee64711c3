"""Nsight Systems: find it, build the ``nsys profile`` command, export the report to SQLite.

Everything here that can be decided without running nsys (which binary, the exact arguments,
what a missing report means) is a pure function, so it is tested on machines without nsys.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from verifyprof.capture.process import run_tool
from verifyprof.contracts.errors import ToolMissingError, VerifyprofError
from verifyprof.contracts.plumbing import outputs
from verifyprof.contracts.plumbing.paths import sqlite_uri

NSYS_ENV = "VERIFYPROF_NSYS"
REPORT_STEM = "capture"  # <out>/capture.nsys-rep, <out>/capture.sqlite

# Where installers put nsys when it is not on the PATH (newest version wins within a pattern).
_SEARCH = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/usr/local/cuda/bin/nsys",
    "/usr/local/cuda/nsight-systems-*/bin/nsys",
)

HOW_TO_GET = (
    "install Nsight Systems (https://developer.nvidia.com/nsight-systems, or the nsight-systems "
    "package of the CUDA repositories), put nsys on the PATH or set VERIFYPROF_NSYS=/path/to/nsys; "
    "or capture with --backend torch (SGLang's own PyTorch-profiler traces)"
)


def find_nsys(env: Mapping[str, str] | None = None) -> Path:
    """The nsys binary: ``$VERIFYPROF_NSYS``, else the PATH, else the usual install places."""
    env = os.environ if env is None else env
    chosen = env.get(NSYS_ENV)
    if chosen:
        path = Path(chosen).expanduser()
        if not path.is_file() or not os.access(path, os.X_OK):
            raise ToolMissingError(f"{NSYS_ENV} is set but is not an executable file", path)
        return path
    found = shutil.which("nsys", path=env.get("PATH"))
    if found:
        return Path(found)
    for pattern in _SEARCH:
        for candidate in sorted(glob.glob(pattern), reverse=True):
            if os.access(candidate, os.X_OK):
                return Path(candidate)
    raise ToolMissingError(f"nsys (Nsight Systems) not found on the PATH: {HOW_TO_GET}")


def nsys_version(nsys: Path, timeout: float = 30.0) -> str | None:
    """``nsys --version`` output (``NVIDIA Nsight Systems version 2025.3.1...``), or None."""
    try:
        out = run_tool(
            [str(nsys), "--version"],
            timeout=timeout,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[-1] if text else None


def profile_command(
    nsys: Path | str,
    app: Sequence[str],
    output: Path,
    *,
    osrt: bool = False,
    capture_range: bool = True,
    extra: Sequence[str] = (),
) -> list[str]:
    """``nsys profile ... -o OUTPUT -- APP``: CUDA + NVTX, no CPU sampling, every child process,
    each kernel of a CUDA graph as its own row, collection only between cudaProfilerStart/Stop
    (``capture_range``, what SGLang's ``CUDA_PROFILER`` activity calls)."""
    trace = "cuda,nvtx,osrt" if osrt else "cuda,nvtx"
    cmd = [
        str(nsys),
        "profile",
        "-t",
        trace,
        "--sample=none",
        "--cpuctxsw=none",
        "--trace-fork-before-exec=true",
        "--cuda-graph-trace=node",
    ]
    if capture_range:
        cmd += ["--capture-range=cudaProfilerApi", "--capture-range-end=stop"]
    cmd += [*extra, "-o", str(output), "-f", "true", *app]
    return cmd


def report_path(output: Path) -> Path:
    """Where ``nsys profile -o OUTPUT`` writes its report."""
    return output.with_name(output.name + ".nsys-rep")


def export_command(nsys: Path | str, report: Path, sqlite: Path, blobs: bool = True) -> list[str]:
    """``blobs``: keep NVTX extended payloads (NCCL's message sizes); nsys before ~2024 lacks the
    flag."""
    extra = ["--include-blobs=true"] if blobs else []
    return [
        str(nsys),
        "export",
        "--type",
        "sqlite",
        *extra,
        "--force-overwrite",
        "true",
        "-o",
        str(sqlite),
        str(report),
    ]


PROGRAM_HOW_TO_GET = (
    HOW_TO_GET.split("; or capture with")[0] + "; or capture with --backend none (no profiler)"
)


def explain_missing_report(output: Path, mode: str = "server", capture_all: bool = False) -> str:
    """Why ``nsys profile -o OUTPUT`` left no report, from what it did leave, in the words of
    the kind of target (a program has no ``/start_profile``)."""
    qdstrm = output.with_name(output.name + ".qdstrm")
    if qdstrm.exists():
        return (
            f"nsys left only {qdstrm.name}: its importer (QdstrmImporter) failed, usually for lack"
            " of libdw.so.1/libelf.so.1; the raw stream is kept"
        )
    if mode == "program" and capture_all:
        return (
            "nsys wrote no report: the program ran no CUDA work, or nsys was killed before"
            " writing it"
        )
    if mode == "program":
        return (
            "nsys wrote no report: the program never called cudaProfilerStart"
            " (torch.cuda.profiler.start()), and by default nsys collects only between"
            " cudaProfilerStart and cudaProfilerStop: run again with --capture-all to profile all"
            " of it, or open that window around the steps to profile"
        )
    return (
        "nsys wrote no report: the capture range never opened (no cudaProfilerStart: did the server"
        " get /start_profile with CUDA_PROFILER and run a step on the GPU?) or nsys was killed"
        " before writing it"
    )


def export_sqlite(
    nsys: Path, report: Path, sqlite: Path, log: Path, timeout: float = 3600.0
) -> Path:
    """Export ``report`` to ``sqlite`` atomically (a partial export never takes the final name)."""
    with outputs.atomic_path(sqlite, suffix=".partial.sqlite") as partial, open(log, "ab") as out:
        for blobs in (True, False):  # an nsys without --include-blobs fails at once: export plainly
            partial.write_bytes(b"")
            try:
                proc = run_tool(
                    export_command(nsys, report, partial, blobs),
                    timeout=timeout,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
            except subprocess.TimeoutExpired as err:
                raise VerifyprofError(
                    f"nsys export did not finish in {timeout:g} s (log: {log})", report
                ) from err
            if proc.returncode == 0 and partial.exists() and partial.stat().st_size > 0:
                break
        else:
            raise VerifyprofError(
                f"nsys export --type sqlite failed with code {proc.returncode} (log: {log})", report
            )
    return sqlite


def gzip_export(sqlite: Path) -> Path:
    """``capture.sqlite`` -> ``capture.sqlite.gz`` (the readers take either), atomically; the
    uncompressed file is removed only once the compressed one is complete."""
    import gzip

    target = sqlite.with_name(sqlite.name + ".gz")
    with (
        outputs.atomic_path(target) as partial,
        open(sqlite, "rb") as src,
        gzip.open(partial, "wb", compresslevel=6) as dst,
    ):
        shutil.copyfileobj(src, dst, length=1 << 20)
    sqlite.unlink()
    return target


def count_ranges(sqlite: Path, prefix: str = "verifyprof.") -> int | None:
    """NVTX ranges whose text (explicit or registered) starts with ``prefix`` in an export; None
    when the file cannot be read as one (the caller then relies on the hook reports)."""
    try:
        with contextlib.closing(sqlite3.connect(sqlite_uri(sqlite, "mode=ro"), uri=True)) as con:
            tables = {
                row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            if "NVTX_EVENTS" not in tables:
                return 0
            join = "LEFT JOIN StringIds s ON s.id = e.textId" if "StringIds" in tables else ""
            text = "COALESCE(e.text, s.value)" if join else "e.text"
            query = f"SELECT COUNT(*) FROM NVTX_EVENTS e {join} WHERE {text} LIKE ?"
            return int(con.execute(query, (prefix + "%",)).fetchone()[0])
    except (sqlite3.Error, OSError):
        return None
