"""Whole-cycle fixes as users apply them: the draft under CUDA graphs (with or without fusion),
torch.compile of every forward, and plain decoding (speculation off); plus the state plain decoding
starts from, which the draft-count curve shares (the state at k drafts is in
:mod:`verifyprof.model.fixes.draft`).

Each fix changes how parts of the cycle run (:mod:`verifyprof.model.cycle.parts`) and the cycle
is re-timed by the host/GPU race, so what a graph hides of the host work between phases (the
accept's eager launches behind a verify replay) is predicted, and what it cannot hide (the host
work after a sync) stays.
"""

from __future__ import annotations

from dataclasses import replace

from verifyprof.model.cycle.parts import HOST_IDLE
from verifyprof.model.cycle.throughput import Cycle
from verifyprof.model.cycle.timing import Costs, as_graph, timed
from verifyprof.model.fixes.anchor import scaled_group
from verifyprof.model.fixes.base import (
    Candidate,
    Scenario,
    Skip,
    Timing,
    edited_group,
    predicted,
    state_parts,
)
from verifyprof.model.fixes.draft import phases_at_width
from verifyprof.model.fixes.verify import fused_verify, graphed_verify
from verifyprof.model.inputs.profile import VerifyProfile

DRAFT_SIDE = ("draft", "draft_extend")


def _graph_draft_side(s: Scenario, compiled: bool) -> tuple[Scenario, list[str]]:
    changed, notes = [], []
    parts = []
    for part in s.parts:
        if part.name in DRAFT_SIDE and part.mode != ("compiled" if compiled else "graph"):
            after = as_graph(part, s.costs, compiled)
            if after is not part:
                changed.append(part.name)
                notes.append(
                    f"{part.name}: {part.cost_ms:.3f} ms per cycle, {part.kernels:.0f} kernels in"
                    f" {part.forwards:.0f} forwards -> GPU {after.busy_ms + after.gap_ms:.3f} ms"
                    f" ({after.kernels:.0f} kernels, {after.gap_ms * 1e3:.0f} us of node gaps)"
                    f", host {after.forwards:.0f} replay calls"
                )
            part = after
        parts.append(part)
    if not changed:
        raise Skip(
            "no eager draft or draft-extend steps in the trace (already graphs, or not traced)"
        )
    return replace(s, parts=tuple(parts)), notes


def _costs_note(c: Costs) -> str:
    return (
        f"a replay call costs the host {c.graph_launch_us:g} us, each kernel node"
        f" {c.graph_node_us:g} us of GPU gap"
        + (f", a compiled call {c.compiled_call_us:g} us more" if c.compiled_call_us else "")
        + f" ({c.source})"
    )


RACE_NOTE = (
    "the cycle re-timed with the host and the GPU racing: a replay is issued in microseconds, so"
    " the eager work around it overlaps its GPU time; the host work after each sync stays exposed"
)


def cuda_graph_draft(profile: VerifyProfile, s: Scenario, now: Cycle) -> Candidate:
    """The draft and draft-extend forwards captured as CUDA graphs, like the verify's."""
    after, notes = _graph_draft_side(s, compiled=False)
    return predicted(
        "cuda_graph_draft", profile, after, now, notes + [_costs_note(s.costs), RACE_NOTE]
    )


def graph_fusion_draft(profile: VerifyProfile, s: Scenario, now: Cycle) -> Candidate:
    """The draft side under torch.compile(mode="reduce-overhead"): graphs plus fusion."""
    after, notes = _graph_draft_side(s, compiled=True)
    return predicted(
        "graph_fusion_draft",
        profile,
        after,
        now,
        notes
        + [
            "elementwise / norm kernels fused into one per region between GEMM and attention"
            " kernels, each at the measured mean small kernel's cost",
            _costs_note(s.costs),
            RACE_NOTE,
        ],
    )


def torch_compile(profile: VerifyProfile, s: Scenario, now: Cycle) -> Candidate:
    """Every forward of the cycle compiled (verify, draft, draft-extend): graphs plus fusion,
    and the host work between phases re-timed under them."""
    if s.verify_mode == "compiled" and all(
        p.mode == "compiled" for p in s.parts if p.name in DRAFT_SIDE
    ):
        raise Skip("the verify and the draft are already compiled")
    if s.speculating and not any(p.name in DRAFT_SIDE and p.mode != "compiled" for p in s.parts):
        raise Skip(
            "no eager draft or draft-extend steps in the cycle: compiling the verify alone is"
            " graph_fusion_verify"
        )
    notes: list[str] = []
    if s.verify_mode != "compiled":
        after, verify_notes = fused_verify(profile, s)
        notes += [f"verify: {n}" for n in verify_notes]
    else:
        after = profile
    s_after = s
    if s.speculating:
        s_after, draft_notes = _graph_draft_side(s, compiled=True)
        notes += draft_notes
    s_after = replace(s_after, verify_mode="compiled")
    notes += [
        "accept and the host work between phases stay eager Python (as torch.compile of the"
        " models leaves them)",
        _costs_note(s.costs),
        RACE_NOTE,
    ]
    return predicted("torch_compile", after, s_after, now, notes)


# ---- plain decoding ------------------------------------------------------------------------


OWN_MODE = "as its verify runs"  # no evidence: plain decoding assumed in the verify's own mode


def plain_mode(profile: VerifyProfile, s: Scenario) -> tuple[str, str]:
    """The execution mode the program runs its single-token forwards in ("eager" | "graph"),
    and the evidence: SGLang's decode CUDA graphs (unless its arguments disable them), a draft
    that replays graphs in the same process, else the verify's own mode."""
    own = "graph" if profile.verify.mode == "graph" or s.verify_mode == "compiled" else "eager"
    if s.decode_graphs is not None:
        return (
            ("graph", "SGLang runs decode as CUDA graphs")
            if s.decode_graphs
            else (
                "eager",
                "the server's arguments disable CUDA graphs",
            )
        )
    draft = next((p for p in s.parts if p.name == "draft"), None)
    if own == "eager" and draft is not None and draft.mode != "eager":
        return "graph", "its drafter's forwards replay CUDA graphs in the same process"
    return own, OWN_MODE


def plain_measured(profile: VerifyProfile, s: Scenario) -> bool:
    """Whether plain decoding's step was measured (decode ranges, a given or captured rate)
    rather than predicted from the verify."""
    return profile.decode_group is not None or s.decode_ms is not None


def plain_state(
    profile: VerifyProfile, s: Scenario, mode: str | None = None
) -> tuple[VerifyProfile, Scenario, str]:
    """Plain decoding as the program would run it: the decode step as the 'verify', accept
    length 1, no draft; and where its step came from (traced decode ranges, a given rate, or the
    verify at width 1 from the width model, in ``mode``: default :func:`plain_mode`'s)."""
    plain = replace(
        s,
        accept_len=1.0,
        draft_ms=0.0,
        overhead_ms=0.0,
        num_draft=0,
        survival=None,
        speculating=False,
    )
    if profile.decode_group is not None:
        group = profile.decode_group
        state = replace(profile, verify=group, width=1, width_times={})
        parts: tuple = ()
        source = f"the trace's decode steps ({group.steps} of {group.name}, {group.mode})"
        measured = group.wall_ms
    else:
        t1, phases1, _ = phases_at_width(profile, s, 1)
        group = edited_group(
            profile.verify,
            {p: phases1.get(p, 0.0) - t for p, t in profile.verify.phases_ms.items()},
        )
        state = replace(profile, verify=group, width=1, width_times={})
        parts = tuple(p for p in s.parts if p.name == "accept")
        source = "the verify at width 1 from the width model (the same kernels over one token)" + (
            " plus the accept's sampling and sync" if parts else ""
        )
        run, why = plain_mode(profile, s) if mode is None else (mode, "as asked")
        if s.decode_ms is None and run == "graph" and group.mode != "graph":
            if s.verify_mode != "compiled":
                state = graphed_verify(state, s)[0]
                source += f", replayed as a CUDA graph: {why}"
        elif s.decode_ms is None and group.mode == "eager":
            source += f", eager: {why}"
        measured = state.verify.wall_ms + sum(p.cost_ms for p in parts)
    # the user's rate beats the trace's decode steps (which then give its shape), a manifest's
    # does not (the trace measured the same program in the same run)
    given = s.decode_ms is not None and (profile.decode_group is None or s.decode_given)
    if given:  # its shape as found, its host time set so the step takes the number
        state, source = _given_mode(state, s, s.decode_ms, source)
        state, parts = _host_matched(state, parts, s.decode_ms)
        measured = s.decode_ms
        how = "given" if s.decode_given else "measured: the capture's plain rate"
        source = f"the plain decode step ({how}), shaped as {source}"
    plain = replace(plain, parts=parts, verify_mode=s.verify_mode)
    base = timed(state_parts(state, plain), s.costs)
    return state, replace(plain, timing=Timing(measured, base), decode_ms=None), source


def _given_mode(
    state: VerifyProfile, s: Scenario, given_ms: float, source: str
) -> tuple[VerifyProfile, str]:
    """A measured plain step keeps its own execution mode: one shorter than the eager shape's
    midpoint to its CUDA-graph replay is taken as a replay (the verify's graph fixes then do not
    speed it up again), its shape the replayed one."""
    if state.verify.mode == "graph" or s.verify_mode == "compiled":
        return state, source
    try:
        graphed = graphed_verify(state, s)[0]
    except Skip:
        return state, source
    eager_ms, graph_ms = state.verify.wall_ms, graphed.verify.wall_ms
    if given_ms >= (eager_ms + graph_ms) / 2:
        return state, source
    return graphed, (
        f"{source}, replayed as a CUDA graph: its {given_ms:.3f} ms is nearer the replay's"
        f" {graph_ms:.3f} ms than the eager step's {eager_ms:.3f} ms"
    )


def _host_matched(state: VerifyProfile, parts: tuple, total_ms: float):
    """The step's host-side time scaled so that it takes ``total_ms`` (its kernels as they are):
    a measured plain decode step, given as one number, on the width model's shape."""
    group = state.verify
    busy = sum(p.busy_ms + p.gap_ms for p in parts)
    busy += sum(t for ph, t in group.phases_ms.items() if ph not in HOST_IDLE)
    host = sum(p.host_idle_ms for p in parts)
    host += sum(group.phases_ms.get(ph, 0.0) for ph in HOST_IDLE)
    if host <= 1e-9 or total_ms <= busy:
        return state, parts
    factor = (total_ms - busy) / host
    scaled = tuple(p.host_scaled(factor) for p in parts)
    return replace(state, verify=scaled_group(group, factor)), scaled


def no_speculation(profile: VerifyProfile, s: Scenario, now: Cycle) -> Candidate:
    """Turn speculation off: one token per plain decode step."""
    if not s.speculating:
        raise Skip("already plain decoding")
    state, plain, source = plain_state(profile, s)
    cand = predicted(
        "no_speculation",
        state,
        plain,
        now,
        [
            f"plain decoding: one token per step, the step from {source}",
            "the same execution mode as today's verify (eager stays eager, graphs stay graphs)",
        ],
        {"num_draft": 0, "width": 1, "decode_source": source},
    )
    return cand
