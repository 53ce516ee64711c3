"""What the trace formats look like on disk: the byte signatures and file names that the
sniffer, the readers and the caches recognise (one definition each)."""

from __future__ import annotations

from pathlib import Path

SQLITE_MAGIC = (  # the first 16 bytes of every SQLite database (an nsys export)
    b"SQLite format 3\x00"
)
GZIP_MAGIC = b"\x1f\x8b"
KINETO_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")
NSYS_SUFFIXES = (
    ".sqlite",
    ".sqlite.gz",
    ".nsys-rep",
    ".qdrep",
)  # one capture's forms, the preferred first (no nsys needed)


def sqlite_header_problem(head: bytes, size: int) -> str | None:
    """Why ``head`` (a file's first 100 bytes) and ``size`` are not a whole SQLite database, or
    None.

    The header records the page size and, while bytes 92-95 equal 24-27, the page count: a file
    shorter than that was cut off (an interrupted copy or export)."""
    if not head.startswith(SQLITE_MAGIC):
        return "not an SQLite file (an nsys export starts with 'SQLite format 3')"
    if len(head) < 100:
        return "truncated SQLite file (shorter than its 100-byte header)"
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    size_valid = head[92:96] == head[24:28]  # the in-header page count is current only then
    if size_valid and pages and size < pages * page_size:
        return f"truncated SQLite file: {size} bytes, its header says {pages * page_size}"
    return None


def is_wal_mode(head: bytes) -> bool:
    """An SQLite header written in WAL journal mode (file format versions 2/2)."""
    return len(head) >= 20 and head[18] == 2 and head[19] == 2


def read_head(path: Path, n: int = 100) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(n)
