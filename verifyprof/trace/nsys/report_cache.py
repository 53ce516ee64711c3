""".nsys-rep -> SQLite export, once, cached while the report is unchanged.

A ``.nsys-rep`` is NVIDIA's own format; only ``nsys export`` reads it. The export is written
to ``.verifyprof-cache/<report name>.sqlite`` beside the report, or, when that directory is
not writable, to the user cache (:func:`verifyprof.trace.cache.cache_dir`: ``$VERIFYPROF_CACHE``,
``$XDG_CACHE_HOME/verifyprof`` or ``~/.cache/verifyprof``) under a name carrying a hash of the
report's path. A JSON sidecar records the report's size and mtime_ns;
the export is reused while they match. ``nsys`` writes to a temporary name that is renamed
into place only when it succeeded, so an interrupted export never looks like a cached one.
The report itself is only read.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

from verifyprof.contracts.errors import ToolMissingError, TraceError

NSYS_ENV = "VERIFYPROF_NSYS"  # path of the nsys binary, when it is not on PATH
CACHE_DIR = ".verifyprof-cache"


def sqlite_for_report(path: Path) -> Path:
    """The SQLite export of an ``.nsys-rep``, exporting it on first use (``ToolMissingError`` without nsys)."""
    path = Path(path)
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise TraceError("no such file", path) from None
    stamp = {"report": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    for target in _cache_candidates(path):
        if _is_fresh(target, stamp):
            return target
    nsys = nsys_binary(path)
    last_error: OSError | None = None
    for target in _cache_candidates(path):
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            probe = target.with_name(f".{target.name}.probe{os.getpid()}")
            probe.touch()
            probe.unlink()
        except OSError as exc:  # not writable: try the next place
            last_error = exc
            continue
        _export(nsys, path, target)
        _write_json(_sidecar(target), {**stamp, "nsys": nsys, "sqlite_size": target.stat().st_size})
        return target
    raise TraceError(f"no writable place for its SQLite export ({last_error})", path)


def nsys_binary(report: Path) -> str:
    """The nsys to run: ``$VERIFYPROF_NSYS`` or ``nsys`` on PATH; ``ToolMissingError`` naming the command otherwise."""
    configured = os.environ.get(NSYS_ENV)
    if configured:
        if Path(configured).is_file() and os.access(configured, os.X_OK):
            return configured
        found = shutil.which(configured)
        if found:
            return found
        raise ToolMissingError(f"{NSYS_ENV}={configured} is not an executable nsys; {export_hint(report)}", report)
    found = shutil.which("nsys")
    if not found:
        raise ToolMissingError(f"reading a .nsys-rep needs Nsight Systems' nsys, which is not on PATH; {export_hint(report)}", report)
    return found


def export_hint(report: Path) -> str:
    out = report.with_suffix(".sqlite")
    command = f"nsys export --type sqlite -o {shlex.quote(str(out))} {shlex.quote(str(report))}"
    return f"export it where nsys is installed ({command}) and pass the .sqlite, or set {NSYS_ENV}=/path/to/nsys"


def _cache_candidates(report: Path) -> list[Path]:
    from verifyprof.trace.cache import cache_dir

    beside = report.resolve().parent / CACHE_DIR / f"{report.name}.sqlite"
    digest = hashlib.sha1(str(report.resolve()).encode()).hexdigest()[:12]
    return [beside, cache_dir() / f"{report.stem}-{digest}.sqlite"]


def _sidecar(target: Path) -> Path:
    return target.with_name(target.name + ".json")


def _is_fresh(target: Path, stamp: dict) -> bool:
    try:
        recorded = json.loads(_sidecar(target).read_text())
        size = target.stat().st_size
    except (OSError, ValueError):
        return False
    return (
        isinstance(recorded, dict)
        and all(recorded.get(k) == v for k, v in stamp.items())
        and recorded.get("sqlite_size") == size
    )


def _export(nsys: str, report: Path, target: Path) -> None:
    tmp = target.with_name(f".{target.stem}.tmp{os.getpid()}.sqlite")
    plain = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(tmp), str(report)]
    with_blobs = plain[:4] + ["--include-blobs=true"] + plain[4:]  # NCCL message sizes (NVTX payloads)
    try:
        done = subprocess.run(with_blobs, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not tmp.is_file():  # an nsys without the flag: export plainly
            done = subprocess.run(plain, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not tmp.is_file():
            detail = (done.stderr.strip() or done.stdout.strip()).splitlines()
            why = detail[-1] if detail else f"exit code {done.returncode}"
            raise TraceError(f"nsys export failed ({why})", report)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)
