"""Before/after: what changed in the verify step between two breakdowns, and whether the model saw
it coming.

Both sides are reduced by :func:`~verifyprof.model.inputs.profile.verify_profile` (the same verify
step the what-if models), so a delta here is a delta of what ``whatif`` would start from. Kernel
families come from kernel tables the caller passes (name, phase, count, total_ns): the model
never reads a trace. A prediction check pairs the change seen (e.g. eager -> graph verify) with
BEFORE's what-if candidate for that change and puts its predicted verify ms and tok/s beside
AFTER's measured ones, with the error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from verifyprof.contracts import phases
from verifyprof.contracts.plumbing.text import counted
from verifyprof.contracts.schema import BreakdownFrame, variant
from verifyprof.model.decision.change import detect, predict_change, same_words
from verifyprof.model.decision.families import family_changes
from verifyprof.model.fixes.base import current_cycle
from verifyprof.model.inputs.profile import VerifyProfile, verify_profile
from verifyprof.model.inputs.step_attrs import with_attr_columns

SCHEMA = "verifyprof.compare/1"
NO_CHANGE_PCT = 1.0  # |verify delta| below this is "no change": run-to-run noise on one GPU


@dataclass
class Side:
    """One input's verify step, as the model sees it."""

    source: str
    gpus: list[str]
    step: str
    width: int | None
    mode: str
    steps: int
    devices: int
    verify_ms: float
    cost_ms: (
        float | None
    )  # mean cost_ns of the modelled rows, before the profile trims idle time the host ran ahead
    kernels: float
    launches: float
    graph_launches: float
    phases_ms: dict[str, float]
    ranks: dict[str, float]  # rank (or "device N") -> mean verify wall ms
    group: str = ""  # the step group: its name and attributes, as whatif's "modelling" line
    device: int = 0  # the device whose steps are averaged (the critical one, as whatif's)
    statistic: str = "mean"  # every number of a side is the mean step of its group
    basis: str = "traced"  # verify_ms, cost_ms, phases_ms: as traced (the profiler's time)
    dilation: float | None = None  # the profiler's slow-down, where the capture measured it
    unprofiled_verify_ms: float | None = None  # the verify as whatif states it (dilation out)
    # other steps' GPU work inside the step's window (pipelined steps): not part of its cost, so
    # not among phases_ms (breakdown's table shows it as the phase other_work)
    other_work_ms: float = 0.0

    @property
    def label(self) -> str:
        """Which numbers these are: the statistic, the group, the device."""
        return f"{self.statistic} of {self.steps} steps of {self.group}, device {self.device}"

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__) | {"label": self.label}


@dataclass
class Comparison:
    before: Side
    after: Side
    reasons: list[str]  # why not comparable (empty: comparable)
    mode_switch: str | None
    warnings: list[str]
    families: dict[str, Any]
    predictions: list[dict[str, Any]] = field(default_factory=list)
    prediction_note: str | None = None
    change: list[str] = field(default_factory=list)  # what changed, in the model's terms
    notes: list[str] = field(default_factory=list)  # which steps each side is, and why

    @property
    def measure(self) -> str:
        return (
            "cost" if self.before.cost_ms is not None and self.after.cost_ms is not None else "wall"
        )

    def verify_ms(self, side: Side) -> float:
        """The profile's verify step (what whatif models: its cost where the breakdown has
        ``cost_ns``)."""
        return side.verify_ms

    @property
    def delta_pct(self) -> float:
        before = self.verify_ms(self.before)
        return 100.0 * (self.verify_ms(self.after) / before - 1.0) if before > 0 else 0.0

    @property
    def verdict(self) -> str:
        if self.reasons:
            return "not comparable"
        if abs(self.delta_pct) < NO_CHANGE_PCT:
            return "no change"
        return "faster" if self.delta_pct < 0 else "slower"

    def verdict_line(self) -> str:
        b, a = self.verify_ms(self.before), self.verify_ms(self.after)
        what = (
            "verify" if "verify" in self.before.step else self.before.step.replace("_", "-")
        )  # a whole-trace step is no verify
        numbers = (
            f"{what} {self.measure} {b:.3f} -> {a:.3f} ms ({self.delta_pct:+.1f}%; the mean step"
            " as traced)"
        )
        if self.reasons:
            return f"not comparable ({'; '.join(self.reasons)}): {numbers}"
        return f"{self.verdict}: {numbers}"

    def gate_failed(self, pct: float) -> bool:
        """``--gate PCT``: verify got slower by more than PCT percent."""
        return self.delta_pct > pct

    def phase_rows(self) -> list[dict[str, Any]]:
        rows = []
        for phase in phases.ALL:
            b, a = self.before.phases_ms.get(phase, 0.0), self.after.phases_ms.get(phase, 0.0)
            if b == 0 and a == 0:
                continue
            rows.append(
                {
                    "phase": phase,
                    "before_ms": b,
                    "after_ms": a,
                    "delta_ms": a - b,
                    "delta_pct": 100.0 * (a / b - 1.0) if b > 0 else None,
                }
            )
        return rows

    def rank_rows(self) -> list[dict[str, Any]]:
        keys = sorted(set(self.before.ranks) | set(self.after.ranks))
        rows = []
        for key in keys:
            b, a = self.before.ranks.get(key), self.after.ranks.get(key)
            rows.append(
                {
                    "rank": key,
                    "before_ms": b,
                    "after_ms": a,
                    "delta_ms": None if a is None or b is None else a - b,
                    "delta_pct": None if a is None or not b else 100.0 * (a / b - 1.0),
                }
            )
        return rows

    def to_json(self, gate: float | None = None) -> dict[str, Any]:
        b, a = self.verify_ms(self.before), self.verify_ms(self.after)
        counts = {
            k: {
                "before": getattr(self.before, k),
                "after": getattr(self.after, k),
                "delta": getattr(self.after, k) - getattr(self.before, k),
            }
            for k in ("kernels", "launches", "graph_launches")
        }
        return {
            "schema": SCHEMA,
            "before": self.before.to_json(),
            "after": self.after.to_json(),
            "verify": {
                "measure": self.measure,
                "before_ms": b,
                "after_ms": a,
                "delta_ms": a - b,
                "delta_pct": self.delta_pct,
            },
            "phases": self.phase_rows(),
            "counts": counts,
            "kernel_families": self.families,
            "ranks": self.rank_rows(),
            "mode_switch": self.mode_switch,
            "warnings": self.warnings,
            "notes": self.notes,
            "comparable": not self.reasons,
            "reasons": self.reasons,
            "verdict": self.verdict,
            "verdict_line": self.verdict_line(),
            "change": self.change,
            "predictions": self.predictions,
            "prediction_note": self.prediction_note,
            "gate": None if gate is None else {"pct": gate, "failed": self.gate_failed(gate)},
        }


def side_of(frame: BreakdownFrame, profile: VerifyProfile | None = None) -> Side:
    """The verify step of one breakdown: the profile's mean step plus per-rank means."""
    profile = profile or verify_profile(frame)
    v = profile.verify
    steps = with_attr_columns(frame.steps)
    rows = steps[(steps["name"] == v.name) & (steps["mode"] == v.mode) & ~steps["_sweep"]]
    if profile.width is not None:
        rows = rows[rows["_width"] == profile.width]
    on_critical = rows[rows["device"] == v.device]
    cost = (
        float(on_critical["cost_ns"].mean()) / 1e6
        if "cost_ns" in rows.columns and len(on_critical)
        else None
    )
    key = np.where(
        rows["rank"].to_numpy() >= 0,
        rows["rank"].astype(str).to_numpy(),
        "device " + rows["device"].astype(str).to_numpy(),
    )
    ranks = {str(k): float(w) / 1e6 for k, w in rows.groupby(key)["wall_ns"].mean().items()}
    label = variant(v.attrs)
    return Side(
        group=v.name + (f" [{label}]" if label else ""),
        device=int(v.device),
        source=frame.source,
        gpus=sorted(set(frame.device_names)),
        step=v.name,
        width=profile.width,
        mode=v.mode,
        steps=v.steps,
        devices=profile.devices,
        verify_ms=v.wall_ms,
        cost_ms=cost,
        kernels=v.kernels,
        launches=v.launches,
        graph_launches=v.graph_launches,
        phases_ms={p: float(v.phases_ms.get(p, 0.0)) for p in phases.ALL if p != "other_work"},
        ranks=ranks,
        other_work_ms=float(v.other_work_ms),
    )


def comparability(before: Side, after: Side) -> list[str]:
    """Why the two verify steps measure different things (empty: they are comparable)."""
    reasons = []
    if before.step != after.step and not after.step.endswith("decode"):
        reasons.append(f"different verify steps ({before.step} vs {after.step})")
    if before.width is not None and after.width is not None and before.width != after.width:
        reasons.append(f"different widths ({before.width} vs {after.width} tokens)")
    if before.gpus and after.gpus and before.gpus != after.gpus:
        reasons.append(f"different GPUs ({', '.join(before.gpus)} vs {', '.join(after.gpus)})")
    if before.devices != after.devices:
        reasons.append(f"different device counts ({before.devices} vs {after.devices})")
    return reasons


def mode_warnings(before: Side, after: Side) -> tuple[str | None, list[str]]:
    if before.mode == after.mode:
        return None, []
    switch = f"{before.mode}->{after.mode}"
    if before.mode == "graph" and after.mode == "eager":
        return switch, [
            f"VERIFY SWITCHED FROM CUDA GRAPHS TO EAGER MODE: {before.graph_launches:.0f} ->"
            f" {after.graph_launches:.0f} graph launches, {before.launches:.0f} ->"
            f" {counted(round(after.launches), 'launch')} per verify step (a draft backend or"
            " option may have disabled the target's graphs)"
        ]
    return (
        switch,
        [],
    )  # eager -> graph is the expected direction: the console and report note the switch


def compare(
    before: BreakdownFrame,
    after: BreakdownFrame,
    before_profile: VerifyProfile,
    after_profile: VerifyProfile,
    before_kernels: pd.DataFrame | None = None,
    after_kernels: pd.DataFrame | None = None,
) -> Comparison:
    """The two breakdowns' verify steps side by side, from each side's profile as the run made it
    once (no prediction check: see :func:`check_change`)."""
    b, a = side_of(before, before_profile), side_of(after, after_profile)
    switch, warnings = mode_warnings(b, a)
    return Comparison(
        before=b,
        after=a,
        reasons=comparability(b, a),
        mode_switch=switch,
        warnings=warnings,
        families=family_changes(before_kernels, after_kernels),
        notes=device_note(b, a) + other_work_note(b, a),
    )


def other_work_note(before: Side, after: Side) -> list[str]:
    """Pipelined steps: the phase table is of each step's cost, which leaves out other steps' GPU
    work inside its window (breakdown's table shows it as the phase other_work)."""
    if before.other_work_ms <= 0 and after.other_work_ms <= 0:
        return []
    return [
        "the phases are of each step's cost: other steps' GPU work inside its window (before"
        f" {before.other_work_ms:.3f} ms, after {after.other_work_ms:.3f} ms; breakdown's phase"
        " other_work) is left out"
    ]


def device_note(before: Side, after: Side) -> list[str]:
    """Each side is its critical device's mean step (the slowest: every rank waits for it, so it
    is the step time the verdict and --gate compare); when those are different devices, the
    phase deltas are one device against another, and this says so."""
    if before.device == after.device:
        return []
    return [
        f"before's numbers are device {before.device}'s and after's device {after.device}'s:"
        " each side's critical (slowest) device, whose step time the verdict and --gate compare;"
        f" each phase's delta is device {after.device} after against device {before.device}"
        " before (the per-rank table pairs each device with itself)"
    ]


def check_change(
    comparison: Comparison, before: Any, after: Any, triton_appeared: bool = False
) -> None:
    """BEFORE's prediction of the change AFTER shows, beside AFTER's measured verify, cycle and
    tokens/s. ``before`` / ``after`` are the model's prepared states (profile and scenario)."""
    for side, state in ((comparison.before, before), (comparison.after, after)):
        if getattr(state, "dilation", None):
            side.dilation = state.dilation
            side.unprofiled_verify_ms = current_cycle(state.profile, state.scenario).verify_ms
    change = detect(before.profile, after.profile, triton_appeared)
    comparison.change = change.words + change.unmodelled
    if not change.modelled:
        seen = change.words + change.unmodelled
        comparison.prediction_note = "no what-if candidate models this change: " + (
            "; ".join(seen) if seen else same_words(before.profile, after.profile)
        )
        return
    pred = predict_change(before.profile, before.scenario, change)
    got = current_cycle(after.profile, after.scenario)
    p = pred.cycle
    comparison.predictions.append(
        {
            "candidate": "+".join(n.split(" ")[0] for n in pred.applied),
            "change": change.words,
            "applied": pred.applied,
            "skipped": pred.skipped,
            "not_modelled": change.unmodelled,
            "predicted_basis": _basis(comparison.before),
            "measured_basis": _basis(comparison.after),
            "predicted_accept_len": p.accept_len,
            "accept_len": got.accept_len,
            "predicted_verify_ms": p.verify_ms,
            "measured_verify_ms": got.verify_ms,
            "verify_error_pct": _error(p.verify_ms, got.verify_ms),
            "predicted_cycle_ms": p.cycle_ms,
            "measured_cycle_ms": got.cycle_ms,
            "cycle_error_pct": _error(p.cycle_ms, got.cycle_ms),
            "predicted_tokens_per_s": p.tokens_per_s,
            "measured_tokens_per_s": got.tokens_per_s,
            "tokens_per_s_error_pct": _error(p.tokens_per_s, got.tokens_per_s),
        }
    )


def _basis(side: Side) -> str:
    """What a state's numbers are: as traced, or at the unprofiled rate (as whatif states them)."""
    if side.dilation:
        return f"at the unprofiled rate (dilation {side.dilation:.2f}x)"
    return "as traced"


def _error(predicted: float, measured: float) -> float | None:
    return 100.0 * (predicted / measured - 1.0) if measured else None
