"""What the trace formats look like on disk: the byte signatures and file names that the
sniffer, the readers and the caches recognise (one definition each)."""

from __future__ import annotations

SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database (an nsys export)
GZIP_MAGIC = b"\x1f\x8b"
KINETO_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")
