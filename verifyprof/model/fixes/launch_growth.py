"""Kernel launches per forward that grow with the batch (issue 41: an eager program's Python
loop over the rows inside its forward, such as a KV-cache update row by row), fitted over the
captures of one program: an eager part's host time moves with its launches.

phillip-kravtsov's gpt-fast fork launches 1804 kernels per verify at batch 1, 2220 at 8 and 3756
at 32 (63 more per row; 5773 at 64), and its drafter 1246, 1862 and 3974 per forward: the host
issues each one, so the GPU's idle while it does (``launch_gap``) grows with them. The GPU-work
fits (:mod:`verifyprof.model.cycle.phase_fit`, :mod:`verifyprof.model.fixes.part_slopes`) hold
that idle fixed, which priced B's batch 64 from its batch-32 capture 20-76% too fast. A line
only where the growth is material (5% over the captured batches): a server's forward launches
the same kernels at any batch, and a graph replay launches none.
"""

from __future__ import annotations

from dataclasses import dataclass

from verifyprof.model.cycle.phase_fit import line_fit

MATERIAL = 0.05  # launches per forward grown by this share over the captured batches: a line


@dataclass(frozen=True)
class LaunchLine:
    """Kernel launches per forward = ``at_zero`` + ``per_request`` x batch (eager)."""

    at_zero: float
    per_request: float

    def at(self, batch: float) -> float:
        return max(self.at_zero + self.per_request * batch, 1.0)

    def ratio(self, frm: float, to: float) -> float:
        """Launches per forward at batch ``to`` over those at ``frm``."""
        return self.at(to) / self.at(frm)


def launch_line(points: list[tuple[int, float]]) -> LaunchLine | None:
    """The line through (batch, launches per forward) of eager steps, or None where fewer than
    two batches measured it or its growth over them is not material."""
    if len({b for b, _ in points}) < 2 or any(n <= 0 for _, n in points):
        return None
    per_request, at_zero = line_fit([b for b, _ in points], [n for _, n in points])
    line = LaunchLine(at_zero, per_request)
    lo, hi = min(b for b, _ in points), max(b for b, _ in points)
    return line if per_request > 0 and line.ratio(lo, hi) - 1 >= MATERIAL else None


def verify_line(captures: list) -> LaunchLine | None:
    """The verify's launches per forward over the eager captures (``measured.Capture``) at the
    first one's width and context."""
    ref = captures[0]
    same = [
        c
        for c in captures
        if not c.predicted
        and c.profile.verify.mode == "eager"
        and (c.profile.width, c.context) == (ref.profile.width, ref.context)
    ]
    return launch_line([(c.batch, c.profile.verify.launches) for c in same])


def launch_gap_delta(line: LaunchLine | None, verify, frm: int, to: int) -> dict[str, float]:
    """The eager verify's ``launch_gap`` moved with its launches from batch ``frm`` to ``to``."""
    if line is None or verify.mode != "eager" or frm == to:
        return {}
    gap = verify.phases_ms.get("launch_gap", 0.0)
    return {"launch_gap": gap * (line.ratio(frm, to) - 1.0)} if gap > 0 else {}


def launch_words(verify: LaunchLine | None, slopes: tuple = ()) -> list[str]:
    """What moves with the launches, in words (none where nothing does)."""
    grown = [("the verify", verify)] + [(sl.name, sl.launches) for sl in slopes]
    said = [f"{name} {line.per_request:.0f}" for name, line in grown if line is not None]
    if not said:
        return []
    return [
        "eager launches per forward grow with the batch (a loop over the rows inside the"
        f" forward): {', '.join(said)} more kernels per request, fitted over the captures; the"
        " host time that issues them moves with them"
    ]
