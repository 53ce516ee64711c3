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


def smallest_capture(path: Path) -> Path:
    """A ``capture --batches`` folder's smallest load (``capture --again`` repeats it, as whatif
    takes it for today's); any other path itself."""
    found = capture_folders(path)
    return found[0] if found else path


def expanded_captures(specs: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """:func:`expand_captures`, and the captures of such a folder left out, each with why: one
    that stopped before it wrote a trace (its manifest not "ok", and no trace in its folder: a
    sweep cut short at its last load). The folder's other captures are still one program's; a
    capture named on its own is never left out (it is read, or refused)."""
    out: list[str] = []
    left: list[tuple[str, str]] = []
    for spec in specs:
        found = capture_folders(Path(spec))
        if not found:
            out.append(spec)
            continue
        reasons = [_stopped_without_trace(f) for f in found]
        kept = [f for f, why in zip(found, reasons) if why is None]
        for n, (folder, why) in enumerate(zip(found, reasons)):
            if why is not None and kept and n < found.index(kept[0]):  # today's was this one
                why += f"; today's capture is {kept[0].name}, the smallest load read"
            if why is not None:
                left.append((str(folder), why))
        out += [str(f) for f in kept]
    if specs and not out and left:  # nothing left to read: the first one's own refusal
        out.append(left.pop(0)[0])
    return out, left


NO_TRACE = "folder holds no trace"  # trace.sources' refusal of a folder with nothing to read


def _stopped_without_trace(folder: Path) -> str | None:
    """Why a sweep's capture folder is left out, None where it is read (or refused by the run:
    an unreadable manifest or folder, several traces). Its trace is looked for first: a folder
    holding one is read whatever its manifest says, so its manifest is opened by the run alone
    (once a command), and only a folder with no trace has its manifest read here."""
    from verifyprof.trace.path_checks import kept_breakdown
    from verifyprof.trace.sources import expand

    try:
        if kept_breakdown(folder) is not None:  # read in the trace's place
            return None
        expand(folder)
        return None
    except VerifyprofError as err:
        if not err.problem.startswith(NO_TRACE):
            return None
    try:
        said = unfinished(manifest_json(folder / "manifest.json"))
    except VerifyprofError:
        return None
    if said is None:
        return None
    how = said.rpartition(": its numbers are")[0]  # "its manifest says the capture ... (error)"
    return f"{how}, and it left no trace: left out, the folder's other captures are used"
