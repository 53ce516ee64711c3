"""What a command's capture arguments stand for, found before the analysis is loaded (a refused
command answers its one line without pandas)."""

from __future__ import annotations

from pathlib import Path

from verifyprof.capture.load_axes import capture_folders
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.manifest import manifest_json, unfinished


def expand_captures(specs: list[str]) -> list[str]:
    """A ``capture --batches`` (``--num-drafts``, ``--contexts``) output folder stands for its
    captures (``batch-N``, ``k-N``, ``ctx-N`` or their joins; smallest load first); every other
    input for itself."""
    return expanded_captures(specs)[0]


def expanded_captures(specs: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """:func:`expand_captures`, and the captures of such a folder left out, each with why: one
    that stopped before it wrote a trace (its manifest not "ok", and nothing in its folder to
    read: a sweep cut short at its last load). The folder's other captures are still one
    program's; a capture named on its own is never left out (it is read, or refused)."""
    out: list[str] = []
    left: list[tuple[str, str]] = []
    for spec in specs:
        found = capture_folders(Path(spec))
        if not found:
            out.append(spec)
            continue
        for folder in found:
            why = _stopped_without_trace(folder)
            if why is None:
                out.append(str(folder))
            else:
                left.append((str(folder), why))
    if specs and not out and left:  # nothing left to read: the first one's own refusal
        out.append(left.pop(0)[0])
    return out, left


def _stopped_without_trace(folder: Path) -> str | None:
    """Why a sweep's capture folder is left out, None where it is read."""
    try:
        said = unfinished(manifest_json(folder / "manifest.json"))
    except VerifyprofError:  # an unreadable manifest: the run says so
        return None
    if said is None:
        return None
    from verifyprof.trace.path_checks import kept_breakdown
    from verifyprof.trace.sources import expand

    if kept_breakdown(folder) is not None:  # read in the trace's place
        return None
    try:
        expand(folder)
        return None
    except VerifyprofError:  # no trace, nor a breakdown kept in its place
        head = said.split(":")[0]  # "its manifest says the capture never finished"
        return f"{head}, and it left no trace: left out, the folder's other captures are used"
