"""Today's cycle anchored to the rate the program measured: every prediction starts from a state
that reproduces it.

A capture with ``--baseline-run`` measured the program's rate unprofiled (the median of
``--baseline-repeat`` runs) and under the profiler. The traced cycle differs from the unprofiled
one for two reasons, taken apart here:

* the profiler slowed the host (each traced launch costs it microseconds): the host-side time of
  every part is scaled so that the cycle takes the measured time (kernels kept as traced);
* the measured rate holds time no range does (prefill amortised over the tokens, a loop outside
  the hooked ranges when no cycle window could be derived): it becomes a part of its own,
  ``unranged``, which no fix changes.

A dilation below 1 (the profiled run was the faster one) or one inside the spread of the
unprofiled runs is noise: it is reported and not applied, and the anchor is the traced run's own
rate.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from verifyprof.contracts.manifest_dilation import median_error
from verifyprof.model.cycle.parts import HOST_IDLE, host_part
from verifyprof.model.cycle.timing import UNRANGED, Costs
from verifyprof.model.fixes.base import Scenario, edited_group, state_parts
from verifyprof.model.inputs.profile import VerifyProfile
from verifyprof.model.inputs.step_group import StepGroup

MIN_HOST_FACTOR = 0.02


@dataclass(frozen=True)
class Anchor:
    """The program's measured rates (tok/s per request) from its capture manifest."""

    profiled_tps: float | None  # the traced run's own rate
    unprofiled_tps: float | None  # the baseline runs' (their median)
    runs: tuple[float, ...] = ()  # every unprofiled run's rate
    source: str = "baseline run"
    recorded: float | None = None  # the manifest's own factor (unprofiled / profiled rate)
    # the program's per-sample rates, (profiled, unprofiled), whose medians the rates are
    samples: tuple[tuple[float, ...], tuple[float, ...]] | None = None

    @property
    def factor(self) -> float | None:
        if self.recorded is not None:
            return self.recorded
        if not self.profiled_tps or not self.unprofiled_tps:
            return None
        return self.unprofiled_tps / self.profiled_tps

    @property
    def spread(self) -> float | None:
        """(max - min) / median of the unprofiled runs, where there are several."""
        if len(self.runs) < 2:
            return None
        return (max(self.runs) - min(self.runs)) / statistics.median(self.runs)

    @property
    def noise(self) -> str | None:
        """Why the dilation is not applied, or None when it is."""
        f, spread = self.factor, self.spread
        if f is None:
            return None
        if f < 1.0:
            return f"below 1 ({f:.2f}x: the profiled run was the faster one)"
        if spread is not None and spread >= f - 1.0:
            return (
                f"{f:.2f}x is inside the unprofiled runs' spread ({100 * spread:.0f}% over"
                f" {len(self.runs)} runs)"
            )
        return None

    @property
    def error(self) -> float:
        """The relative standard error of the rate :meth:`target` reproduces: the median of the
        unprofiled samples (or runs) where the dilation applies, of the profiled samples where
        it does not; 0 where fewer than three say it."""
        if self.factor is not None and self.noise is None:
            return median_error(self.samples[1] if self.samples else self.runs)
        return median_error(self.samples[0]) if self.samples and self.profiled_tps else 0.0

    def target(self) -> tuple[float, str] | None:
        """The rate today's cycle reproduces, and what it is."""
        if self.factor is not None and self.noise is None:
            runs = f", median of {len(self.runs)} runs" if len(self.runs) > 1 else ""
            spread = f" (spread {100 * self.spread:.0f}%)" if self.spread is not None else ""
            return self.unprofiled_tps, f"the unprofiled rate ({self.source}{runs}){spread}"
        if self.profiled_tps:
            return self.profiled_tps, "the traced run's own rate"
        return None

    def words(self) -> str:
        """The dilation in one clause, with its spread and whether it is applied."""
        f = self.factor
        if f is None:
            return "no dilation measured"
        runs = ", ".join(f"{r:,.1f}" for r in self.runs)
        measured = f"dilation {f:.2f}x ({self.source}" + (f": {runs} tok/s" if runs else "") + ")"
        why = self.noise
        return f"{measured} is noise, not applied: {why}" if why else f"{measured} applied"


def anchored(
    profile: VerifyProfile, s: Scenario, anchor: Anchor
) -> tuple[VerifyProfile, Scenario, list[str]]:
    """The state whose cycle takes the anchor's measured time at today's accept length."""
    target = anchor.target()
    if target is None:
        return profile, s, []
    rate, what = target
    applied = anchor.noise is None and anchor.factor
    s = replace(s, basis="unprofiled" if applied else "traced run", anchor_band=anchor.error)
    measured_ms = s.accept_len / rate * 1e3
    parts = state_parts(profile, s)
    traced = sum(p.cost_ms for p in parts)
    busy = sum(p.busy_ms + p.gap_ms for p in parts)
    host = traced - busy
    notes = []
    if anchor.noise is not None:
        notes.append(f"the profiler's {anchor.words()}")
    if measured_ms < traced and host > 1e-9:
        factor = min(max((measured_ms - busy) / host, MIN_HOST_FACTOR), 1.0)
        profile, s = unprofiled(profile, s, factor)
        notes.append(
            f"today's cycle {traced:.3f} ms as traced, {measured_ms:.3f} ms at {what}"
            f" ({rate:,.1f} tok/s at accept length {s.accept_len:.2f}): host-side time (launch"
            f" gaps, host waits, graph-launch calls) x{factor:.2f}, kernel times as traced"
        )
        traced = busy + factor * host
    extra = measured_ms - traced
    if extra > 1e-6 * measured_ms:
        s = replace(s, parts=(*s.parts, host_part(UNRANGED, extra)))
        notes.append(
            f"{what} ({rate:,.1f} tok/s) means a {measured_ms:.3f} ms cycle; the traced cycle is"
            f" {traced:.3f} ms: {extra:.3f} ms per cycle ({100 * extra / measured_ms:.0f}%) lie"
            " outside every range (time the program spends beyond its phases: prefill, a loop"
            " outside the hooked ranges); kept as the part 'unranged', which no fix changes"
        )
    elif measured_ms < traced * (1 - 0.05):
        notes.append(
            f"today's cycle stays {100 * (traced / measured_ms - 1):.0f}% above {what}: the"
            " host-side time could not shrink further (kernels alone take longer)"
        )
    return profile, s, notes


def scaled_group(group: StepGroup | None, factor: float) -> StepGroup | None:
    """``group`` with its host-side idle times ``factor`` times as long."""
    if group is None:
        return None
    out = edited_group(group, {p: group.phases_ms.get(p, 0.0) * (factor - 1) for p in HOST_IDLE})
    return replace(out, post_sync_ms=group.post_sync_ms * factor)


def unprofiled(profile: VerifyProfile, s: Scenario, factor: float):
    """The profile and scenario with host-side time scaled by ``factor``."""
    p = replace(
        profile,
        verify=scaled_group(profile.verify, factor),
        decode_group=scaled_group(profile.decode_group, factor),
    )  # width_times kept: differences between widths are kernel work, which stays as traced
    parts = tuple(part.host_scaled(factor) for part in s.parts)
    return p, replace(s, parts=parts, costs=unprofiled_costs(s.costs, profile.calibration, factor))


def unprofiled_costs(costs: Costs, calibration: dict[str, float], factor: float) -> Costs:
    """Costs measured on the trace's own graph steps ran under the profiler too: scaled alike
    (nsys's per-node tracing stretches the node gaps as its per-call tracing does the host)."""
    scaled = {k: getattr(costs, k) * factor for k in calibration if hasattr(costs, k)}
    return replace(costs, **scaled) if scaled else costs
