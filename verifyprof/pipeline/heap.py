"""Freed memory kept for the next file, in a process that maps file after file.

glibc returns a large block to the OS as soon as it is freed (blocks over the mmap threshold, and
the heap's free top over the trim threshold), so every file's arrays are faulted in afresh: on
the 16-CPU H200 host (a KVM guest) ~110k page faults, a fifth to a quarter of a rank file's map
(bench/README.md, "Many ranks"). A worker that keeps freed memory in its heap serves the next
file from it. Its peak RSS is unchanged (the next file reuses what the last one freed); only the
return of memory between files is given up, which is why the inline map restores the defaults.
No-op where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from contextlib import contextmanager

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
KEPT_MMAP_THRESHOLD = 1 << 30  # blocks up to 1 GiB come from the heap (a file's largest array is ~100 MB)
KEPT_TRIM_THRESHOLD = (1 << 31) - 1  # never give the heap's free top back between files
DEFAULT_THRESHOLD = 128 * 1024  # glibc's initial mmap and trim thresholds


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:  # not glibc (musl, macOS): its allocator keeps its own policy
        return None


def keep_freed_memory() -> bool:
    """For the rest of this process (a map worker): freed memory stays for the next file."""
    libc = _glibc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, KEPT_MMAP_THRESHOLD)) and bool(libc.mallopt(M_TRIM_THRESHOLD, KEPT_TRIM_THRESHOLD))


@contextmanager
def freed_memory_kept() -> Iterator[None]:
    """Within the block (the inline map of several files) freed memory is kept; after it, glibc's
    initial thresholds again and the free heap handed back (a notebook's process is not a worker)."""
    kept = keep_freed_memory()
    try:
        yield
    finally:
        libc = _glibc() if kept else None
        if libc is not None:
            libc.mallopt(M_MMAP_THRESHOLD, DEFAULT_THRESHOLD)
            libc.mallopt(M_TRIM_THRESHOLD, DEFAULT_THRESHOLD)
            libc.malloc_trim(0)
