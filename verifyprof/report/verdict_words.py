"""The verdict's words as the report gives them, on the page and in ``report --json`` alike: the
model's own sentences split into the decision's items, never re-worded; without a ranking, the
verdict's step group in numbers."""

from __future__ import annotations

from typing import Any

from verifyprof.contracts import phases
from verifyprof.contracts.plumbing.text import counted
from verifyprof.contracts.schema import group_label
from verifyprof.report.data import ReportData, cost_ns, modes, ms, story_group

DECISION_MARKS = (". Today: ", ". After the plan: ")  # where the verdict's decision splits
DECISION_LABELS = {"answer": "Decision", "today": "Today", "after-plan": "After the plan"}


def verdict_text(data: ReportData) -> str:
    """The model's verdict; without a ranking, breakdown's (the step on the device whatif would
    model); without a story (a breakdown JSON of other steps), the verdict's group in numbers."""
    r = data.ranking
    if r is not None and r.verdict is not None:
        return r.verdict.text()
    if data.verdict:  # breakdown's, word for word
        return data.verdict
    group = story_group(data)
    if group is None:
        return "no steps"
    costs = {p: v["mean"] for p, v in group["phases"].items() if p not in phases.OTHER}
    top = max(costs, key=costs.__getitem__)
    cost = cost_ns(group)  # what shares are of, as in the model's verdict
    share = f"{100 * costs[top] / cost:.1f}% of its cost" if cost > 0 else "no cost"
    idle = ", GPU idle" if top in phases.IDLE else ""
    return (
        f"{group_label(group['name'], group['variant'])}: median {ms(group['wall_ns']['p50'])} ms,"
        f" mean {ms(group['wall_ns']['mean'])} ms ({modes(group)};"
        f" {counted(group['launches']['mean'], 'launch')} and"
        f" {counted(group['kernels']['mean'], 'kernel')} per step). Dominant cost: {top}"
        f" ({share}{idle})."
    )


def decision_parts(decision: str | None) -> list[tuple[str, str]]:
    """The verdict's decision as its sentences (the model's words, split, never re-worded):
    (key, text) for the answer, today's comparison and the one after the plan."""
    if not decision:
        return []
    parts, rest, key = [], decision, "answer"
    for mark, next_key in zip(DECISION_MARKS, ("today", "after-plan"), strict=True):
        head, found, tail = rest.partition(mark)
        if not found:
            continue
        parts.append((key, head + "."))
        rest, key = mark[2:] + tail, next_key
    return parts + [(key, rest)]


def decision_items(verdict: Any) -> list[tuple[str, str, str]]:
    """(key, label, text): what to do first, speculating against plain decoding today and after
    the plan, and the best number of drafts, in the order the page lists them; empty ones left
    out."""
    items = [("first", "What to do first", verdict.plan)]
    for key, text in decision_parts(verdict.decision):
        label = DECISION_LABELS[key]
        items.append((key, label, text.removeprefix(f"{label}: ")))
    items.append(("best-k", "Number of drafts", verdict.drafts))
    return [(key, label, text) for key, label, text in items if text]
