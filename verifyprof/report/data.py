"""What an HTML report shows, gathered by the pipeline: plain frames and dicts, no plotting here
(the pipeline is analysis and never imports plotly; :mod:`verifyprof.report.html` draws this)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from verifyprof.attribution.timeline import StepTimeline


@dataclass
class ReportData:
    source: str
    trace: dict[str, Any]  # the breakdown JSON's "trace" block
    phases: list[str]  # the breakdown's phase list, in its order
    steps: pd.DataFrame  # the steps frame (schema.BreakdownFrame.steps)
    summary: dict[str, Any]  # the breakdown JSON's "summary"
    whatif: dict[str, Any] | None = None  # Ranking.to_json(): the same numbers as --json
    ranking: Any = None  # the model's Ranking (typed: verdict, plan, candidates, curve, plain)
    group: tuple[str, str] | None = None  # the story's step group: (name, variant), verify first
    group_why: str = ""  # which group the verdict is about, and why that one
    group_mode: str = ""  # its mode (eager, graph): a name and attributes may run in both
    whatif_note: str = ""  # why there is no what-if
    verdict: str | None = None  # without a ranking: breakdown's verdict (pipeline.resolve)
    kernels: dict[str, Any] | None = None  # KernelTable.to_json(top)
    timelines: list[StepTimeline] = field(default_factory=list)
    timeline_note: str = ""
    compare: dict[str, Any] | None = None  # Comparison.to_json()
    comparison: Any = None  # the model's Comparison (typed)
    notes: list[str] = field(default_factory=list)
    # (capture, why) of each capture that did not finish or was left out: warned on stderr too
    unfinished: list[tuple[str, str]] = field(default_factory=list)


def ms(ns: float) -> str:
    return f"{ns / 1e6:.3f}"


def story_groups(data: ReportData) -> list[dict[str, Any]]:
    """The summary's step groups, the verdict's group (``data.group``) first, the rest in the
    summary's order."""
    groups = list(data.summary.get("groups") or [])
    if data.group is None:
        return groups
    first = [g for g in groups if (g["name"], g["variant"]) == tuple(data.group)]
    return first + [g for g in groups if g not in first]


def story_group(data: ReportData) -> dict[str, Any] | None:
    groups = story_groups(data)
    return groups[0] if groups else None


def cost_ns(group: dict[str, Any]) -> float:
    """A group's mean cost per step: its wall less other steps' GPU work in its window (the wall
    in summaries from before cost_ns)."""
    return float((group.get("cost_ns") or group["wall_ns"])["mean"])


def modes(group: dict[str, Any]) -> str:
    return ", ".join(f"{m} x{n}" for m, n in group["modes"].items())
