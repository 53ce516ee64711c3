"""From a verify profile to the scenario's cycle: its parts, the launch and replay costs (from the
trace's own graph steps where it has them), what stops a graph, and the profiler's dilation taken
out of the host time so that every prediction is stated at the unprofiled rate.

The profiler slows the host (each traced launch costs it microseconds), not the kernels: with a
measured dilation D (profiled / unprofiled cycle), the cycle C = B + H (GPU busy + everything
else) runs unprofiled at C / D = B + s H, so the host-side time of every part is scaled by
s = (C / D - B) / H.
"""

from __future__ import annotations

from dataclasses import replace

from verifyprof.model.cycle.parts import HOST_IDLE
from verifyprof.model.cycle.timing import Costs, measured_parts, timed
from verifyprof.model.fixes.base import Capturability, Scenario, Timing, edited_group, state_parts
from verifyprof.model.inputs.hardware import Hardware
from verifyprof.model.inputs.profile import VerifyProfile
from verifyprof.model.inputs.step_group import StepGroup

DEFAULTS = Costs()


def launch_costs_of(hardware: Hardware | None, calibration: dict[str, float]) -> Costs:
    """The hardware file's launch costs, replaced by the trace's own graph steps where present."""
    launch = hardware.launch if hardware is not None else None
    base = (
        Costs(
            kernel_launch_us=launch.kernel_launch_us,
            graph_launch_us=launch.graph_launch_us,
            graph_node_us=launch.graph_node_us,
            compiled_call_us=launch.compiled_call_us,
            source=f"hardware file {hardware.name}",
        )
        if launch is not None
        else replace(DEFAULTS, source="defaults (no --hardware)")
    )
    taken = []
    for key, label in (
        ("graph_node_us", "node gap"),
        ("graph_launch_us", "replay call"),
        ("compiled_call_us", "compiled call"),
    ):
        if key in calibration:
            base = replace(base, **{key: calibration[key]})
            taken.append(f"{label} {calibration[key]:.2f} us")
    if taken:
        base = replace(
            base, source=f"{base.source}; from the trace's graph steps: {', '.join(taken)}"
        )
    return base


def host_factor(profile: VerifyProfile, s: Scenario, dilation: float) -> float | None:
    """s of the module docstring: the share of host-side time left without the profiler."""
    parts = state_parts(profile, s)
    cycle = sum(p.cost_ms for p in parts)
    busy = sum(p.busy_ms + p.gap_ms for p in parts)
    host = cycle - busy
    if dilation <= 0 or host <= 1e-9:
        return None
    return min(max((cycle / dilation - busy) / host, 0.02), 1.0)


def scaled_group(group: StepGroup | None, factor: float) -> StepGroup | None:
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
        width_times={},
    )
    parts = tuple(part.host_scaled(factor) for part in s.parts)
    return p, replace(s, parts=parts, costs=unprofiled_costs(s.costs, profile.calibration, factor))


def unprofiled_costs(costs: Costs, calibration: dict[str, float], factor: float) -> Costs:
    """Costs measured on the trace's own graph steps ran under the profiler too: scaled alike
    (nsys's per-node tracing stretches the node gaps as its per-call tracing does the host)."""
    scaled = {k: getattr(costs, k) * factor for k in calibration if hasattr(costs, k)}
    return replace(costs, **scaled) if scaled else costs


def capturability(profile: VerifyProfile, assumed: bool) -> Capturability:
    groups = {"verify": profile.verify, "draft": profile.draft_group}
    return Capturability(
        syncs={k: g.host_syncs for k, g in groups.items() if g is not None},
        kernel_cv={k: g.kernels_cv for k, g in groups.items() if g is not None},
        assumed=assumed,
    )


def with_cycle(
    profile: VerifyProfile,
    s: Scenario,
    hardware: Hardware | None,
    dilation: float | None = None,
    numbers_given: bool = False,
    assume_capturable: bool = False,
) -> tuple[VerifyProfile, Scenario, list[str]]:
    """The scenario with its cycle as parts (re-timed by fixes), its costs, capturability and,
    with a dilation, both at the unprofiled rate; and notes saying what was done."""
    notes: list[str] = []
    s = replace(
        s,
        costs=launch_costs_of(hardware, profile.calibration),
        capturable=capturability(profile, assume_capturable),
    )
    if numbers_given:  # --draft-ms / --overhead-ms: the cycle is those numbers, summed
        return profile, s, notes
    parts = tuple(p for p in measured_parts(profile, s.num_draft) if p.name != "verify")
    s = replace(s, parts=parts)
    if dilation and dilation > 1.0:
        factor = host_factor(profile, s, dilation)
        if factor is not None:
            profile, s = unprofiled(profile, s, factor)
            notes.append(
                f"stated at the unprofiled rate: the capture measured the profiler's dilation"
                f" {dilation:.2f}x, taken out of the host-side time (launch gaps, host waits,"
                f" graph-launch calls: x{factor:.2f}); kernel times kept as traced"
            )
    all_parts = state_parts(profile, s)
    measured = sum(p.cost_ms for p in all_parts)
    s = replace(
        s,
        timing=Timing(measured, timed(all_parts, s.costs)),
        draft_ms=sum(p.cost_ms for p in all_parts if p.name == "draft"),
        overhead_ms=sum(p.cost_ms for p in all_parts if p.name not in ("draft", "verify")),
    )
    return profile, s, notes
