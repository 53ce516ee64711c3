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
    whatif: dict[str, Any] | None = (
        None  # Ranking.to_json() (plan/verdict when the model gives them)
    )
    whatif_note: str = ""  # why there is no what-if
    kernels: dict[str, Any] | None = None  # KernelTable.to_json(top)
    timelines: list[StepTimeline] = field(default_factory=list)
    timeline_note: str = ""
    compare: dict[str, Any] | None = None  # Comparison.to_json()
    notes: list[str] = field(default_factory=list)
