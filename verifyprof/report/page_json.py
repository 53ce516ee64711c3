"""``report --json``: the numbers the page shows, section by section, in the shapes the other
commands' ``--json`` print them (whatif's Ranking, kernels' table, compare's Comparison, the
breakdown's step groups), so a test, a notebook or CI reads the report without parsing HTML."""

from __future__ import annotations

from typing import Any

from verifyprof.report.data import ReportData, story_group, story_groups
from verifyprof.report.verdict_words import decision_items, verdict_text


def page_json(data: ReportData) -> dict[str, Any]:
    """The page's numbers: the verdict and the decision's items first, as on the page; then the
    what-if, the step groups (the verdict's first), the top kernels of its group, the compare."""
    r = data.ranking
    verdict = r.verdict if r is not None else None
    group = story_group(data)
    return {
        "source": data.source,
        "trace": data.trace,
        "notes": list(data.notes),
        "verdict": verdict_text(data),
        "verdict_about": (verdict.group if verdict is not None else data.group_why) or None,
        "decision": [
            {"key": key, "label": label, "text": text}
            for key, label, text in (decision_items(verdict) if verdict is not None else [])
        ],
        "group": None
        if group is None
        else {
            "name": group["name"],
            "variant": group["variant"],
            "mode": data.group_mode or None,
            "steps": group["steps"],
        },
        "whatif": data.whatif,
        "whatif_note": data.whatif_note or None,
        "step_groups": story_groups(data),
        "kernels": data.kernels,
        "compare": data.compare,
        "timeline_note": data.timeline_note or None,
    }
