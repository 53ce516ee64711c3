"""The fields of a capture manifest that several captures compare (``whatif CAP1 CAP2``: which
loads a capture drove, when it started), checked as capture writes them: one line naming the
file and the field, never a TypeError later in the comparison."""

from __future__ import annotations

import contextlib
from datetime import datetime
from pathlib import Path
from typing import Any

from verifyprof.contracts.errors import VerifyprofError


def check_kept(kept: dict[str, Any], path: Path) -> None:
    """The fields several captures compare, each as capture writes it: ``workload`` an object,
    ``loads`` a list of load records (a number was a TypeError, a string counted its letters as
    loads) and ``started_at`` a time with its UTC offset (one without, beside one with, was a
    TypeError)."""
    workload = kept.get("workload")
    if workload is not None and not isinstance(workload, dict):
        raise VerifyprofError(
            f"manifest field 'workload' must be an object (a server capture's workload), got"
            f" {workload!r:.60}",
            path,
        )
    loads = kept.get("loads")
    if loads is not None and not (
        isinstance(loads, list) and all(isinstance(load, dict) for load in loads)
    ):
        raise VerifyprofError(
            f"manifest field 'loads' must be a list of load records (objects), got {loads!r:.60}",
            path,
        )
    started = kept.get("started_at")
    if started is None:
        return
    when = None
    if isinstance(started, str):
        with contextlib.suppress(ValueError):
            when = datetime.fromisoformat(started)
    if when is None or when.tzinfo is None:
        raise VerifyprofError(
            "manifest field 'started_at' must be an ISO 8601 time with its UTC offset (as capture"
            f" writes it), got {started!r:.60}",
            path,
        )
