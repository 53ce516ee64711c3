"""Timing a cycle of parts: each part as the host issues it and the GPU runs it in its mode
(eager, graph replay, compiled replay), raced by :func:`verifyprof.model.cycle.overlap.period_ms`.

Predictions are deltas: a state's cycle is the measured cycle plus ``timed(state) -
timed(measured parts)``, so whatever the race leaves out of the measured cycle (noise, work
outside every range) carries over unchanged, as the verify-level fixes do with phases.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from verifyprof.model.cycle.overlap import Work, period_ms
from verifyprof.model.cycle.parts import Part, fused, host_part, part_of


@dataclass(frozen=True)
class Costs:
    """Host and GPU costs of launches and replays (us), and where each came from."""

    kernel_launch_us: float = 5.0  # host time of one eager launch
    graph_launch_us: float = 8.0  # host time of one replay call (Python around it included)
    graph_node_us: float = 1.0  # GPU idle per node of a replayed graph
    # host time a compiled callable adds per call before its replay (guards, cudagraph trees):
    # host wait inside the compiled step, which the race may hide behind earlier GPU work
    compiled_call_us: float = 0.0
    source: str = "defaults"


def work_of(part: Part, costs: Costs, absorbed_ms: float = 0.0) -> Work:
    """``part`` as the race sees it; ``absorbed_ms`` of its host time is the idle after an
    earlier part's sync, which the race adds back as that sync's ``after_sync_ms``."""
    sync = part.syncs > 0
    if part.mode == "eager":
        return Work(
            part.name,
            host_ms=max(part.cost_ms - absorbed_ms, part.busy_ms),
            gpu_ms=part.busy_ms + part.gap_ms,
            tail_ms=0.0,
            sync=sync,
            after_sync_ms=part.post_sync_ms,
        )
    per_call = costs.graph_launch_us
    # what the GPU waited on the host for: input preparation at the edges once graphed, every
    # host pause between the replays of a measured graph step
    waited = max(part.host_idle_ms - absorbed_ms, 0.0)
    host = part.forwards * per_call / 1e3 + waited
    return Work(
        part.name,
        host_ms=host,
        gpu_ms=part.busy_ms + part.gap_ms,
        lag_ms=host if part.forwards <= 1 else per_call / 1e3 + min(part.edge_ms, waited),
        tail_ms=(part.busy_ms + part.gap_ms) / part.forwards if part.forwards > 1 else None,
        sync=sync,
        after_sync_ms=part.post_sync_ms,
    )


def works(parts: list[Part], costs: Costs) -> list[Work]:
    """The race's inputs, in cycle order. The idle after a sync lies in the windows of the parts
    that follow it (their leading edge, the host work between phases): it is taken out of their
    eager host time once, since the sync adds it back."""
    pending = 0.0
    absorbed = [0.0] * len(parts)
    for _ in range(2):  # wrap around: the sync ending a cycle is followed by the next cycle
        for i, part in enumerate(parts):
            if pending > 0:
                take = min(pending, max(part.host_idle_ms - part.edge_ms, 0.0) + part.edge_ms)
                take = min(take, part.cost_ms - absorbed[i])
                absorbed[i] += take
                pending -= take
            if part.syncs > 0:
                pending += part.post_sync_ms if _ == 0 else 0.0
    return [work_of(p, costs, absorbed[i]) for i, p in enumerate(parts)]


def timed(parts: list[Part], costs: Costs) -> float:
    """Steady-state ms per cycle of ``parts``."""
    return period_ms(works(parts, costs), cycles=6)


def as_graph(part: Part, costs: Costs, compiled: bool = False) -> Part:
    """``part`` captured as CUDA graph replays (``compiled``: under torch.compile with cudagraphs,
    its small kernels fused first): the GPU idle between its kernels goes, each kernel node adds
    the per-node gap; the idle at its edges (input preparation) stays host work."""
    if part.mode == "compiled" or (part.mode == "graph" and not compiled):
        return part
    base = fused(part)[0] if compiled else part
    gap = base.kernels * costs.graph_node_us / 1e3
    if part.mode == "graph":  # already replayed: fusion removes nodes and their gaps
        gap = part.gap_ms * (base.kernels / part.kernels if part.kernels > 0 else 1.0)
    calls = base.forwards * costs.compiled_call_us / 1e3 if compiled else 0.0
    return replace(
        base,
        gap_ms=gap,
        host_idle_ms=min(part.edge_ms, part.host_idle_ms) + calls,
        mode="compiled" if compiled else "graph",
    )


# host parts no fix touches: the program's loop outside the hooked ranges (a derived cycle
# window's time its phases leave), and what the measured rate holds beyond the traced cycle
LOOP, UNRANGED = "loop", "unranged"


def measured_parts(profile, num_draft: int | None) -> list[Part]:  # profile: VerifyProfile
    """The cycle's parts as the trace measured them (per cycle), in cycle order."""
    out: list[Part] = []
    spent, syncs, after = 0.0, 0.0, 0.0
    sources = (
        ("draft", profile.draft_group, profile.draft_ms),
        ("verify", profile.verify, profile.verify.wall_ms),
        ("accept", profile.accept_group, profile.accept_ms),
        ("draft_extend", profile.draft_extend_group, profile.draft_extend_ms),
    )
    for name, group, per_cycle in sources:
        if group is None or not per_cycle:
            continue
        forwards = None
        times = per_cycle / max(group.wall_ms, 1e-9)
        if name == "draft" and group.mode != "graph":
            forwards = float(num_draft or 1) if times < 1.5 else times  # one range or one per step
        part = part_of(name, group, per_cycle, forwards)
        if name == "draft" and times < 1.5:  # one range a cycle: its edges are the fixed part
            part = replace(part, fixed_ms=part.edge_ms)
        out.append(part)
        spent += part.cost_ms
        syncs += part.syncs
        after += part.post_sync_ms
    cycle = profile.cycle_group
    if profile.cycle_ms is not None:
        rest = max((cycle.wall_ms if cycle else profile.cycle_ms) - spent, 0.0)
        extra_syncs = max((cycle.host_syncs if cycle else 0.0) - syncs, 0.0)
        extra_after = max((cycle.post_sync_ms if cycle else 0.0) - after, 0.0)
        if rest > 0 or extra_syncs > 0:
            name = LOOP if profile.loop_derived else "rest"
            out.append(host_part(name, rest, extra_syncs, min(extra_after, rest)))
    return out
