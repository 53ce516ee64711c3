"""Freed memory kept for the next file, in a map worker process.

glibc returns a large block to the OS as soon as it is freed (blocks over the mmap threshold, and
the heap's free top over the trim threshold), so every file's arrays are faulted in afresh: a
150 MB Kineto rank file ~105k page faults, ~0.2 s of system time on the 16-CPU H200 host (a KVM
guest). A worker that keeps freed memory in its heap serves the next file from it (~64k faults);
bench/README.md ("Many ranks") has the measurements. The nsys reader trims the heap after each
read (its Arrow threads' arenas), which gives most of it back: for nsys rank files the gain is a
few per cent.

Only processes that exist for the run are set so: map workers, and the CLI's own process when it
maps file after file itself (``--workers 1``; ``ParallelOptions.own_process``). mallopt switches
glibc's dynamic thresholds off for the life of the process, which no later call can undo, so a
library caller's process (a notebook) keeps its allocator as it was. The cost is
resident memory: a worker holds its largest file's footprint between files, and files of growing
sizes can fragment its heap above the largest one's peak. No-op where the C library is not glibc.
"""

from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
KEPT_MMAP_THRESHOLD = (
    1 << 30
)  # blocks up to 1 GiB come from the heap (a file's largest array is ~100 MB)
KEPT_TRIM_THRESHOLD = (1 << 31) - 1  # never give the heap's free top back between files


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "mallopt") else None
    except OSError:  # not glibc (musl, macOS): its allocator keeps its own policy
        return None


def keep_freed_memory() -> bool:
    """For the rest of this process (a map worker): freed memory stays for the next file."""
    libc = _glibc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, KEPT_MMAP_THRESHOLD)) and bool(
        libc.mallopt(M_TRIM_THRESHOLD, KEPT_TRIM_THRESHOLD)
    )
