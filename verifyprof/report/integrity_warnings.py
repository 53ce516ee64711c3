"""The trace's integrity problems (``trace.integrity`` of the breakdown JSON) as warning lines
on stderr, for ``--json`` runs whose stdout is the JSON (the tables print them in their
header, with the reader's other warnings)."""

from __future__ import annotations

import sys
from typing import Any

from verifyprof.contracts.plumbing.text import safe_text


def warn_integrity(records: list[dict[str, Any]], where: str) -> None:
    """Each record as ``verifyprof: warning: WHERE: MESSAGE`` (names escaped: they are data)."""
    for record in records:
        line = safe_text(f"{where}: {record['message']}")
        print(f"verifyprof: warning: {line}", file=sys.stderr)
