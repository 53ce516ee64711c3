"""From a verify profile to the scenario's cycle: its parts, the launch and replay costs (from the
trace's own graph steps where it has them), what stops a graph, and today's cycle anchored to
the program's measured rate (:mod:`verifyprof.model.fixes.anchor`)."""

from __future__ import annotations

from dataclasses import replace

from verifyprof.contracts.plumbing.text import counted
from verifyprof.model.cycle.timing import LOOP, Costs, measured_parts, timed
from verifyprof.model.fixes.anchor import Anchor, anchored
from verifyprof.model.fixes.base import Capturability, Scenario, Timing, state_parts
from verifyprof.model.inputs.hardware import Hardware
from verifyprof.model.inputs.profile import VerifyProfile

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
    anchor: Anchor | None = None,
    numbers_given: bool = False,
    assume_capturable: bool = False,
) -> tuple[VerifyProfile, Scenario, list[str]]:
    """The scenario with its cycle as parts (re-timed by fixes), its costs, capturability and,
    with an anchor, today's cycle at the program's measured rate; and notes saying what was
    done."""
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
    notes += [
        f"the program's loop outside the hooked ranges: {p.cost_ms:.3f} ms per cycle"
        f" ({counted(round(p.syncs, 1), 'host sync')}, {p.post_sync_ms:.3f} ms of GPU idle after"
        " them): sampling, bookkeeping, the accept decision; host Python between phases, which no"
        " graph or compile fix removes"
        for p in parts
        if p.name == LOOP and (p.cost_ms > 5e-4 or p.syncs > 0)
    ]
    s = replace(s, traced_verify_ms=profile.verify.wall_ms)
    if anchor is not None:
        profile, s, anchor_notes = anchored(profile, s, anchor)
        notes += anchor_notes
    all_parts = state_parts(profile, s)
    measured = sum(p.cost_ms for p in all_parts)
    s = replace(
        s,
        timing=Timing(measured, timed(all_parts, s.costs)),
        draft_ms=sum(p.cost_ms for p in all_parts if p.name == "draft"),
        overhead_ms=sum(p.cost_ms for p in all_parts if p.name not in ("draft", "verify")),
    )
    return profile, s, notes
