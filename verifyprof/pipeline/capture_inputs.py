"""What a command's capture arguments stand for, found before the analysis is loaded (a refused
command answers its one line without pandas)."""

from __future__ import annotations

from pathlib import Path

from verifyprof.capture.load_axes import capture_folders


def expand_captures(specs: list[str]) -> list[str]:
    """A ``capture --batches`` (``--num-drafts``, ``--contexts``) output folder stands for its
    captures (``batch-N``, ``k-N``, ``ctx-N`` or their joins; smallest load first); every other
    input for itself."""
    out = []
    for spec in specs:
        found = capture_folders(Path(spec))
        out += [str(p) for p in found] if found else [spec]
    return out
