"""whatif --details: each candidate's assumptions, blocks and warnings; a line several candidates
share word for word (a host-sync warning, a replay call's cost) is printed once, with their
numbers, not once per candidate."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from verifyprof.report.layout import Console, hanging

KINDS = (  # a candidate's lists: bullet, key, indent, style
    ("-", "assumptions", 4, None),
    ("blocked:", "blocked_by", 9, "yellow"),
    ("!", "warnings", 4, "yellow"),
)


def shared(candidates: list[dict[str, Any]]) -> dict[tuple[str, str], list[int]]:
    """(bullet, line) -> the numbers of the candidates listing it, for lines listed by several."""
    seen: dict[tuple[str, str], list[int]] = {}
    for i, cand in enumerate(candidates, start=1):
        for bullet, key, _, _ in KINDS:
            for line in dict.fromkeys(cand.get(key, [])):
                seen.setdefault((bullet, line), []).append(i)
    return {k: v for k, v in seen.items() if len(v) > 1}


def print_assumptions(candidates: list[dict[str, Any]], console: Console) -> None:
    """Each candidate's own lines under its number and name; then the shared ones, once."""
    common = shared(candidates)
    console.print("[bold]Assumptions[/bold] (those several candidates share: after the list)")
    for i, cand in enumerate(candidates, start=1):
        console.print(f"{i}. [bold]{escape(cand['name'])}[/bold]", highlight=False)
        for bullet, key, indent, style in KINDS:
            own = [x for x in dict.fromkeys(cand.get(key, [])) if (bullet, x) not in common]
            hanging(console, own, bullet, indent, style)
    if common:
        console.print("[bold]Shared by several candidates[/bold] (their numbers first)")
        for bullet, _, indent, style in KINDS:  # assumptions, then blocks, then warnings
            lines = [(n, x) for (b, x), n in common.items() if b == bullet]
            said = [f"({', '.join(map(str, n))}) {x}" for n, x in lines]
            hanging(console, said, bullet, indent, style)


def verdict_warnings(warnings: list[str], candidates: list[dict[str, Any]]) -> list[str]:
    """The verdict's warnings for --details, whose Assumptions already list each candidate's
    blocks and warnings: a warning made of one candidate's (``NAME is not ranked first: ...``,
    ``NAME: ...``) becomes its name on one line, not the same sentences once more per candidate."""
    blocked, warned, kept = [], [], []
    for warning in warnings:
        for cand in candidates:
            name = cand["name"]
            if warning == f"{name} is not ranked first: " + "; ".join(cand.get("blocked_by", [])):
                blocked.append(name)
                break
            if warning in (f"{name}: {w}" for w in cand.get("warnings", [])):
                warned += [] if name in warned else [name]
                break
        else:
            kept.append(warning)
    if blocked:
        names = ", ".join(blocked)
        kept.append(f"not ranked first, blocked: {names} (what blocks each: Assumptions)")
    if warned:
        kept.append(f"warned of: {', '.join(warned)} (the warning: Assumptions)")
    return kept
