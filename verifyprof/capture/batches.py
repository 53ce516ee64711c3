"""One capture per batch size of a program (issue 32 item 3): ``capture --batches 1,8 --out DIR
-- python prog.py --batch {batch}`` runs the program once per batch, ``{batch}`` replaced in its
command (and in ``--decode-cmd``), each capture in ``DIR/batch-N``; ``whatif DIR`` then reads
them as captures of one program (the first, the smallest batch, as today's run).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from verifyprof.capture.options import CaptureOptions, validate
from verifyprof.capture.results import CaptureResult
from verifyprof.contracts.errors import VerifyprofError

PLACEHOLDER = "{batch}"
FOLDER = "batch-{}"


def parse_batches(text: str) -> tuple[int, ...]:
    """``1,8,32`` -> (1, 8, 32): distinct, positive, in the order given."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise VerifyprofError(f"--batches: a comma-separated list of batch sizes, got {text!r:.60}")
    if any(v < 1 for v in values) or len(set(values)) != len(values):
        raise VerifyprofError(f"--batches {text}: distinct batch sizes of 1 or more")
    return values


def per_batch(opts: CaptureOptions, batches: tuple[int, ...]) -> list[CaptureOptions]:
    """The options of each batch's capture; the program must name ``{batch}`` somewhere."""
    if opts.mode != "program":
        raise VerifyprofError(
            "--batches is for a program (after --); a server's load is --concurrency"
        )
    if not any(PLACEHOLDER in arg for arg in opts.program):
        raise VerifyprofError(
            f"--batches: the program's command names no {PLACEHOLDER} to replace (e.g. -- python"
            f" prog.py --batch {PLACEHOLDER})"
        )
    if opts.out.exists():
        raise VerifyprofError(f"{opts.out}: --out must be a new folder (it holds one per batch)")
    return [
        replace(
            opts,
            out=opts.out / FOLDER.format(b),
            program=[arg.replace(PLACEHOLDER, str(b)) for arg in opts.program],
            decode_cmd=opts.decode_cmd.replace(PLACEHOLDER, str(b)) if opts.decode_cmd else None,
        )
        for b in batches
    ]


def capture_batches(opts: CaptureOptions, batches: tuple[int, ...], run_one) -> list[CaptureResult]:
    """Each batch's capture in turn (``run_one``: the one-capture flow); the first failure stops
    the rest, what was captured kept."""
    each = per_batch(opts, batches)
    for o in each:  # every batch's options checked before the first starts
        validate(o)
    opts.out.mkdir(parents=False)
    return [run_one(o) for o in each]


def capture_folders(folder: Path) -> list[Path] | None:
    """A ``--batches`` output (``DIR/batch-N`` capture folders), smallest batch first; None when
    ``folder`` is not one."""
    if not folder.is_dir() or (folder / "manifest.json").exists():
        return None
    found = []
    for child in folder.iterdir():
        name = child.name
        if name.startswith("batch-") and name[6:].isdigit() and (child / "manifest.json").is_file():
            found.append((int(name[6:]), child))
    return [p for _, p in sorted(found)] or None
