"""A per-user cache for files derived from traces (decompressed exports, nsys exports).

Derived files are keyed by the source's resolved path, size and mtime, so an edited or replaced
source is never answered from a stale cache. Writes are atomic (temp file, then rename).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import zlib
from pathlib import Path

from verifyprof.contracts.errors import TraceError


def cache_dir() -> Path:
    root = os.environ.get("VERIFYPROF_CACHE") or os.environ.get("XDG_CACHE_HOME")
    base = Path(root) if root else Path.home() / ".cache"
    return base / "verifyprof" if not os.environ.get("VERIFYPROF_CACHE") else base


def cache_key(path: Path) -> str:
    stat = path.stat()
    text = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def gunzipped(path: Path, suffix: str) -> Path:
    """The decompressed content of ``path`` (gzip), made once and reused while ``path`` is unchanged."""
    directory = cache_dir()
    target = directory / f"{path.name.removesuffix('.gz')}.{cache_key(path)}{suffix}"
    if target.exists():
        return target
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TraceError(f"cannot create cache directory {directory}: {exc.strerror}", path) from None
    tmp = target.with_name(target.name + f".{os.getpid()}.tmp")
    try:
        with gzip.open(path, "rb") as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst, length=4 << 20)
        os.replace(tmp, target)
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceError(f"corrupt or truncated gzip: {exc}", path) from None
    finally:
        tmp.unlink(missing_ok=True)
    return target
