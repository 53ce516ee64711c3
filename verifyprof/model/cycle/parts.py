"""The speculative cycle as parts (draft, verify, accept, draft-extend, the rest) with what the
GPU and the host do in each, so that a fix can change how one part runs and the cycle be re-timed
by :mod:`verifyprof.model.cycle.overlap`.

Each part is per cycle: GPU busy time (kernels, copies, collectives), the graph's node gaps, the
GPU idle waiting on the host, kernel counts (for fusion), forwards per cycle (graph replays), host
syncs and the idle after them. Parts come from the measured step groups; a part nobody traced
(no accept ranges, say) is folded into ``rest``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from verifyprof.contracts import phases
from verifyprof.model.inputs.step_group import StepGroup

SMALL_KERNEL_PHASES = ("elementwise", "norm", "moe_aux")  # what Inductor-style fusion merges
HEAVY_KERNEL_PHASES = ("attention", "gemm_dense", "gemm_moe")  # fusion regions end at these
HOST_IDLE = ("graph_launch", "launch_gap", "host_wait")
MODES = ("eager", "graph", "compiled")


@dataclass(frozen=True)
class Part:
    """One phase of the cycle, per cycle (ms)."""

    name: str  # draft | verify | accept | draft_extend | rest | decode
    busy_ms: float  # GPU busy: every non-idle phase
    gap_ms: float  # GPU idle between the nodes of its graph replays
    host_idle_ms: float  # GPU idle waiting on the host: launches, Python, graph-launch calls
    kernels: float
    small: float  # elementwise / norm / routing kernels
    small_ms: float
    heavy: float  # GEMM and attention kernels
    forwards: float  # forwards (graph replays once graphed) per cycle
    mode: str = "eager"  # eager | graph | compiled (a graph with Inductor's fusion)
    syncs: float = 0.0
    post_sync_ms: float = 0.0  # GPU idle after those syncs until the next GPU op
    edge_ms: float = 0.0  # of host_idle_ms: before the first / after the last op of a forward
    # of host_idle_ms: what one range per cycle spends outside its forwards (entering the
    # drafter, gathering its tokens): the same at any number of forwards
    fixed_ms: float = 0.0

    @property
    def cost_ms(self) -> float:
        return self.busy_ms + self.gap_ms + self.host_idle_ms

    def scaled(self, factor: float) -> Part:
        """``factor`` times as much of the same work (k drafts instead of k0)."""
        return replace(
            self,
            busy_ms=self.busy_ms * factor,
            gap_ms=self.gap_ms * factor,
            host_idle_ms=self.host_idle_ms * factor,
            kernels=self.kernels * factor,
            small=self.small * factor,
            small_ms=self.small_ms * factor,
            heavy=self.heavy * factor,
            forwards=self.forwards * factor,
            syncs=self.syncs * factor,
            post_sync_ms=self.post_sync_ms * factor,
            edge_ms=self.edge_ms * factor,
            fixed_ms=self.fixed_ms * factor,
        )

    def with_forwards(self, forwards: float) -> Part:
        """The same work over ``forwards`` forwards: the per-forward part scaled, the fixed part
        kept (a draft of k2 steps instead of k)."""
        if self.forwards <= 0:
            return self
        ratio = max(forwards, 0.0) / self.forwards
        fixed = min(self.fixed_ms, self.host_idle_ms)
        out = self.scaled(ratio)
        return replace(
            out,
            host_idle_ms=out.host_idle_ms + fixed * (1 - ratio),
            edge_ms=max(out.edge_ms + fixed * (1 - ratio), 0.0),
            fixed_ms=fixed,
        )

    def host_scaled(self, factor: float) -> Part:
        """Host-side time times ``factor`` (the profiler's dilation taken out)."""
        return replace(
            self,
            host_idle_ms=self.host_idle_ms * factor,
            post_sync_ms=self.post_sync_ms * factor,
            edge_ms=self.edge_ms * factor,
            fixed_ms=self.fixed_ms * factor,
        )


def part_of(
    name: str, group: StepGroup, per_cycle_ms: float | None, forwards: float | None = None
) -> Part:
    """A part from a measured step group: ``per_cycle_ms`` of it per cycle (the group's mean step
    repeated as often as that takes), ``forwards`` per cycle when known (default: one per step,
    or its graph launches in graph mode)."""
    wall = max(group.wall_ms, 1e-9)
    per_cycle = group.wall_ms if per_cycle_ms is None else per_cycle_ms
    times = per_cycle / wall
    p = group.phases_ms
    idle = sum(p.get(ph, 0.0) for ph in HOST_IDLE)
    busy = sum(t for ph, t in p.items() if ph not in phases.IDLE)
    gap = p.get("graph_gap", 0.0)
    if forwards is None:
        forwards = max(group.graph_launches, 1.0) if group.mode == "graph" else 1.0
        forwards *= times
    part = Part(
        name=name,
        busy_ms=busy * times,
        gap_ms=gap * times,
        host_idle_ms=max(per_cycle - (busy + gap) * times, 0.0),
        kernels=group.kernels * times,
        small=sum(group.counts.get(ph, 0.0) for ph in SMALL_KERNEL_PHASES) * times,
        small_ms=sum(p.get(ph, 0.0) for ph in SMALL_KERNEL_PHASES) * times,
        heavy=sum(group.counts.get(ph, 0.0) for ph in HEAVY_KERNEL_PHASES) * times,
        forwards=forwards,
        mode="graph" if group.mode == "graph" else "eager",
        syncs=group.host_syncs * times,
        post_sync_ms=group.post_sync_ms * times,
        edge_ms=min(max(group.wall_ms - group.gpu_span_ms, 0.0), idle) * times,
    )
    return part


def host_part(name: str, per_cycle_ms: float, syncs: float = 0.0, post_sync_ms: float = 0.0):
    """Cycle time no traced part holds: host work between the phases (GPU idle)."""
    return Part(
        name=name,
        busy_ms=0.0,
        gap_ms=0.0,
        host_idle_ms=max(per_cycle_ms, 0.0),
        kernels=0.0,
        small=0.0,
        small_ms=0.0,
        heavy=0.0,
        forwards=0.0,
        syncs=syncs,
        post_sync_ms=post_sync_ms,
    )


def fused(part: Part) -> tuple[Part, float]:
    """``part`` after Inductor-style fusion: its small kernels merged into one per region between
    heavy kernels (each costing the measured mean small kernel); and how many it leaves."""
    if part.small <= 1 or part.small_ms <= 0:
        return part, part.small
    regions = part.heavy + part.forwards  # one region after each heavy kernel, one per forward
    left = min(part.small, regions)
    saved = part.small_ms * (1 - left / part.small)
    return (
        replace(
            part,
            busy_ms=part.busy_ms - saved,
            small_ms=part.small_ms - saved,
            kernels=part.kernels - (part.small - left),
            small=left,
        ),
        left,
    )
