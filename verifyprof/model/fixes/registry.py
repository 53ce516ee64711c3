"""Every fix whatif ranks, in one table: its name, its builder and what the rest of the model
must know of it (the phases it shrinks, the parts it graphs, the fixes it excludes, whether plain
numbers can rank it). The ranking, the plan, the verdict's "not addressed" list, plain decoding's
track and plain numbers all read this table, through the functions below, when they run: adding
a fix is one entry here plus its builder.

The order is the ranking's: candidates of equal predicted tokens/s, the skipped list and the
fixes named for a phase come in this order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from verifyprof.model.cycle.throughput import Cycle
from verifyprof.model.fixes.base import Candidate, Scenario
from verifyprof.model.fixes.comm import custom_allreduce
from verifyprof.model.fixes.cycle import (
    cuda_graph_draft,
    graph_fusion_draft,
    no_speculation,
    torch_compile,
)
from verifyprof.model.fixes.draft import better_drafter, draft_tokens
from verifyprof.model.fixes.verify import (
    FLOOR_PHASES,
    cuda_graph_verify,
    graph_fusion_verify,
    host_overhead,
    kernel_floor,
)
from verifyprof.model.inputs.profile import VerifyProfile

# Today's verify profile, the scenario and today's cycle -> one Candidate, or raises Skip.
Builder = Callable[[VerifyProfile, Scenario, Cycle], Candidate]
NO_SPECULATION = "no_speculation"  # the k = 0 end: every ranking has it, the plan may end on it


@dataclass(frozen=True)
class Fix:
    """One candidate fix. ``shrinks``: the verify phases it can shrink (a phase none of the
    applicable fixes shrinks is listed as not addressed). ``graphs``: the parts it captures as a
    CUDA graph (blocked where one cannot be captured). ``exclusive``: the groups of alternatives
    it belongs to (once one is in the plan, the rest of its groups are not stacked on it).
    ``needs_trace``: plain numbers (``whatif --verify-ms``) cannot rank it; ``why_trace`` says
    why where the general reason does not. ``speculative_only``: it changes nothing a plain
    decode step has (not applied to plain decoding's track)."""

    name: str
    build: Builder
    shrinks: tuple[str, ...] = ()
    graphs: tuple[str, ...] = ()
    exclusive: tuple[str, ...] = ()
    needs_trace: bool = True
    why_trace: str = ""
    speculative_only: bool = False


_FUSES = ("moe_aux", "norm", "elementwise")  # the small kernels graph fusion merges
FIXES: tuple[Fix, ...] = (
    Fix(NO_SPECULATION, no_speculation, needs_trace=False, speculative_only=True),
    Fix(
        "cuda_graph_verify",
        cuda_graph_verify,
        shrinks=("launch_gap",),
        graphs=("verify",),
        exclusive=("verify_graph",),
    ),
    Fix(
        "graph_fusion_verify",
        graph_fusion_verify,
        shrinks=(*_FUSES, "graph_gap", "launch_gap"),
        graphs=("verify",),
        exclusive=("verify_graph",),
    ),
    Fix(
        "torch_compile",
        torch_compile,
        shrinks=(*_FUSES, "launch_gap"),
        graphs=("verify", "draft"),
        exclusive=("verify_graph", "draft_graph"),
    ),
    Fix("host_overhead", host_overhead, shrinks=("graph_launch", "host_wait")),
    Fix(
        "custom_allreduce",
        partial(custom_allreduce, fused=False),
        shrinks=("allreduce",),
        exclusive=("allreduce",),
        needs_trace=False,
    ),
    Fix(
        "allreduce_fusion",
        partial(custom_allreduce, fused=True),
        shrinks=("norm", "allreduce", "graph_gap"),
        exclusive=("allreduce",),
        why_trace=(
            "needs a trace: the RMSNorm time and launches it removes are inside the rest the"
            " roofline does not explain"
        ),
    ),
    Fix(
        "cuda_graph_draft",
        cuda_graph_draft,
        graphs=("draft",),
        exclusive=("draft_graph",),
        speculative_only=True,
    ),
    Fix(
        "graph_fusion_draft",
        graph_fusion_draft,
        graphs=("draft",),
        exclusive=("draft_graph",),
        speculative_only=True,
    ),
    Fix(
        "fewer_draft_tokens",
        partial(draft_tokens, more=False),
        exclusive=("draft_count",),
        needs_trace=False,
        speculative_only=True,
    ),
    Fix(
        "more_draft_tokens",
        partial(draft_tokens, more=True),
        exclusive=("draft_count",),
        needs_trace=False,
        speculative_only=True,
    ),
    Fix("better_drafter", better_drafter, needs_trace=False, speculative_only=True),
    *(Fix(f"kernel_floor:{p}", kernel_floor(p), shrinks=(p,)) for p in FLOOR_PHASES),
)


def names() -> tuple[str, ...]:
    return tuple(f.name for f in FIXES)


def by_name() -> dict[str, Fix]:
    return {f.name: f for f in FIXES}


def builders() -> list[tuple[str, Builder]]:
    """(name, builder) of every fix, in the ranking's order."""
    return [(f.name, f.build) for f in FIXES]


def phase_fixes() -> dict[str, tuple[str, ...]]:
    """The fixes that can shrink each verify phase (phases none shrinks left out)."""
    out: dict[str, tuple[str, ...]] = {}
    for f in FIXES:
        for phase in f.shrinks:
            out[phase] = (*out.get(phase, ()), f.name)
    return out


def excluded_by(name: str) -> set[str]:
    """The fixes a plan holding ``name`` no longer stacks: itself and its groups' others."""
    groups = set(by_name()[name].exclusive) if name in by_name() else set()
    return {name} | {f.name for f in FIXES if groups & set(f.exclusive)}


def speculative_only() -> frozenset[str]:
    return frozenset(f.name for f in FIXES if f.speculative_only)
