"""Speculate or not, and with how many drafts: plain decoding beside the speculative cycle, the
break-even accept length and cycle, and the draft-count curve k = 0..K.

Plain decoding is the k = 0 end of the curve. It is compared like for like: beside each step of
the speculative plan, plain decoding with the fixes of that plan so far that apply to a decode
step (graphs, fusion, compile, allreduce, host), so "the plan wins from step N" never compares a
graphed speculative cycle with an eager decode step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verifyprof.model.cycle.throughput import Cycle
from verifyprof.model.decision.plan import Builder, PlanStep, stack
from verifyprof.model.decision.today import cannot_pay, clear_best, payable
from verifyprof.model.fixes import registry
from verifyprof.model.fixes.base import Candidate, Scenario, Skip, cycle_of, predicted
from verifyprof.model.fixes.cycle import OWN_MODE, plain_measured, plain_mode, plain_state
from verifyprof.model.fixes.draft import (
    _num_draft,
    curve_point,
    draft_count_basis,
    width_source,
    with_drafts,
)
from verifyprof.model.inputs.profile import VerifyProfile

CURVE_MIN_K = 8  # the curve reaches at least this many drafts (and 4 past today's)
CURVE_PAST = 4


@dataclass
class PlainDecoding:
    """Plain decoding today, and beside each step of the speculative plan."""

    cycle: Cycle  # one decode step: accept length 1
    source: str
    spec: Cycle  # today's speculative cycle, for the break-evens
    along_plan: list[float] = field(default_factory=list)  # plain tok/s after plan steps 1..i
    wins_from: int | None = None  # first plan step (1-based) beating plain decoding there
    candidate: Candidate | None = None
    measured: bool = True  # the step was measured (decode ranges, a given or captured rate)
    mode: str = ""  # the execution mode it is predicted in (eager | graph), when predicted
    evidence: str = ""  # why that mode
    # predicted plain decoding in the other mode: (mode, tok/s), where the decision depends on it
    alternative: tuple[str, float] | None = None
    spec_after_plan: float | None = None  # speculating after the whole plan (tok/s)
    max_accept_len: float | None = None  # the most a cycle can accept: drafts + 1, where known
    after: tuple[VerifyProfile, Scenario] | None = None  # its state after the plan's fixes
    # where the plan was rebuilt as plain decoding's own (off first, then its fixes)
    own_plan: bool = False

    @property
    def tokens_per_s(self) -> float:
        return self.cycle.tokens_per_s

    @property
    def decode_ms(self) -> float:
        return self.cycle.cycle_ms

    @property
    def speculation_loses(self) -> bool:
        return self.spec.tokens_per_s < self.tokens_per_s

    @property
    def flips(self) -> bool:
        """Whether speculate-or-not flips with plain decoding's unmeasured execution mode."""
        if self.measured or self.alternative is None:
            return False
        return (self.alternative[1] > self.spec.tokens_per_s) != self.speculation_loses

    @property
    def unmeasured_flip(self) -> bool:
        """The answer flips with the mode and nothing in the run says which mode plain decoding
        would run in (the mode is the verify's own, by default): no decision without measuring.
        With evidence (a drafter replaying graphs in the same process, SGLang's decode graphs)
        the verdict decides and names the other mode's rate."""
        return self.flips and not self.mode_evidenced

    @property
    def mode_evidenced(self) -> bool:
        return not self.measured and self.evidence != OWN_MODE

    @property
    def break_even_accept_len(self) -> float:
        """The accept length at which today's cycle matches plain decoding."""
        return self.spec.cycle_ms / self.decode_ms

    @property
    def break_even_cycle_ms(self) -> float:
        """The cycle at which today's accept length matches plain decoding."""
        return self.spec.accept_len * self.decode_ms

    def to_json(self) -> dict[str, Any]:
        return {
            "decode_ms": self.decode_ms,
            "tokens_per_s": self.tokens_per_s,
            "source": self.source,
            "speculation_loses": self.speculation_loses,
            "break_even_accept_len": self.break_even_accept_len,
            "break_even_cycle_ms": self.break_even_cycle_ms,
            "tokens_per_s_along_plan": self.along_plan,
            "plan_wins_from": self.wins_from,
            "measured": self.measured,
            **({"mode": self.mode, "mode_evidence": self.evidence} if not self.measured else {}),
            **(
                {"alternative": {"mode": self.alternative[0], "tokens_per_s": self.alternative[1]}}
                if self.alternative
                else {}
            ),
            "depends_on_unmeasured_mode": self.unmeasured_flip,
            "flips_with_mode": self.flips,
        }


def plain_decoding(
    profile: VerifyProfile,
    s: Scenario,
    now: Cycle,
    plan: list[PlanStep],
    builders: dict[str, Builder],
) -> PlainDecoding | None:
    """Plain decoding's rate today and along the plan; None when no decode step can be had."""
    if not s.speculating:
        return None
    try:
        state, plain, source = plain_state(profile, s)
    except Skip:
        return None
    out = PlainDecoding(cycle_of(state, plain), source, now)
    k = _num_draft(profile, s)
    out.max_accept_len = float(k + 1) if k else None
    if not plain_measured(profile, s):
        out.measured = False
        out.mode, out.evidence = plain_mode(profile, s)
        other = "eager" if out.mode == "graph" else "graph"
        try:
            alt = plain_state(profile, s, mode=other)
            out.alternative = (other, cycle_of(alt[0], alt[1]).tokens_per_s)
        except Skip:
            pass
    out.after = (state, plain)
    if plan:
        out.spec_after_plan = plan[-1].cumulative_tps
    speculative_only = registry.speculative_only()  # not applied to the plain track
    for i, step in enumerate(plan, start=1):
        name = step.candidate.name
        if name not in speculative_only and name in builders:
            try:
                applied = builders[name](state, plain, cycle_of(state, plain))
                state = applied.profile or state
                plain = applied.scenario or plain
            except Skip:
                pass
        rate = cycle_of(state, plain).tokens_per_s
        out.along_plan.append(rate)
        out.after = (state, plain)
        if step.cumulative_tps <= rate:
            out.wins_from = None  # winning means winning from there on
        elif out.wins_from is None:
            out.wins_from = i
    return out


def decided_plan(
    plan: list[PlanStep],
    plain: PlainDecoding | None,
    profile: VerifyProfile,
    s: Scenario,
    builders: dict[str, Builder],
    curve: DraftCurve | None = None,
) -> list[PlanStep]:
    """One decision: where plain decoding beats speculating after the plan, the plan ends by
    turning speculation off. Speculating wins today: the fixes, then off (plain decoding with
    the same fixes). Plain decoding wins today too: off first, then the fixes that apply to a
    decode step, stacked on it (no speculative fix comes first leaving the rate below plain
    decoding's). Unchanged where the answer hangs on plain decoding's unmeasured mode."""
    if plain is None or plain.after is None or plain.unmeasured_flip:
        return plan
    now = plain.spec
    spec_after = plan[-1].cumulative_tps if plan else now.tokens_per_s
    plain_after = plain.along_plan[-1] if plan else plain.tokens_per_s
    if plain_after <= spec_after and not cannot_pay(now.accept_len):
        return plan
    words = "turn speculation off: one token per plain decode step"
    if not plain.speculation_loses or clear_best(curve) is not None:  # speculating wins today
        state, plain_s = plain.after
        last = plan[-1].candidate.cycle if plan else now
        fixes = ", ".join(step.candidate.name for step in plan) or "none"
        off = predicted(
            registry.NO_SPECULATION,
            state,
            plain_s,
            last,
            [f"{words}, with the fixes above that apply to a decode step ({fixes})"],
            {"num_draft": 0, "width": 1, "decode_source": plain.source},
        )
        plain.along_plan = plain.along_plan + [plain_after]
        return plan + [PlanStep(off, plain_after, now.tokens_per_s)]
    try:
        off = builders[registry.NO_SPECULATION](profile, s, now)
    except Skip:
        return plan
    track = [(n, b) for n, b in builders.items() if n not in registry.speculative_only()]
    steps = stack(track, off.profile or profile, off.scenario or s)
    final = steps[-1].cumulative_tps if steps else off.cycle.tokens_per_s
    if final < spec_after and not cannot_pay(now.accept_len):  # speculating's plan wins after
        return plan
    out = [PlanStep(off, off.cycle.tokens_per_s, now.tokens_per_s)]
    out += [PlanStep(st.candidate, st.cumulative_tps, now.tokens_per_s) for st in steps]
    plain.along_plan = [st.cumulative_tps for st in out]
    plain.wins_from, plain.own_plan = None, True
    return out


@dataclass
class DraftCurve:
    """Tokens/s per number of drafts, k = 0 (plain decoding) .. K, today's execution mode."""

    points: list[dict[str, Any]]
    current_k: int
    sglang: bool = False
    draft_known: bool = True  # False: no draft time measured or given (priced at 0)

    @property
    def at_edge(self) -> bool:
        """The best k is the largest tried: more drafts may do better still."""
        return self.best["num_draft"] == max(p["num_draft"] for p in self.points)

    @property
    def best(self) -> dict[str, Any]:
        return max(payable(self.points), key=lambda p: p["tokens_per_s"])

    @property
    def best_set(self) -> list[int]:
        """Every k the model cannot tell from the best (its rate within either's band)."""
        top = self.best
        return sorted(
            p["num_draft"]
            for p in payable(self.points)
            if p["tokens_per_s"]
            >= top["tokens_per_s"] * (1 - max(top.get("band", 0.0), p.get("band", 0.0)))
        )

    def server_flags(self) -> str | None:
        """SGLang's flags for the best k (chain drafting: topk 1)."""
        best = self.best
        if not self.sglang or not best["num_draft"]:
            return None
        k = best["num_draft"]
        return (
            f"--speculative-num-steps {k} --speculative-eagle-topk 1"
            f" --speculative-num-draft-tokens {k + 1}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "points": self.points,
            "current_num_draft": self.current_k,
            "best_num_draft": self.best["num_draft"],
            "best_tokens_per_s": self.best["tokens_per_s"],
            "best_num_draft_set": self.best_set,
            "server_flags": self.server_flags(),
            "draft_cost_known": self.draft_known,
            "best_at_edge": self.at_edge,
        }


def draft_curve(
    profile: VerifyProfile, s: Scenario, now: Cycle, plain: PlainDecoding | None
) -> DraftCurve | None:
    """k = 0..K: plain decoding, every k from the width model and the survival curve."""
    k = _num_draft(profile, s)
    if not k or not s.speculating:
        return None
    top = max(CURVE_MIN_K, k + CURVE_PAST)
    points = []
    if plain is not None:
        points.append(
            {
                "num_draft": 0,
                "width": 1,
                "verify_ms": plain.decode_ms,
                "draft_ms": 0.0,
                "overhead_ms": 0.0,
                "cycle_ms": plain.decode_ms,
                "accept_len": 1.0,
                "tokens_per_s": plain.tokens_per_s,
                "verify_source": "measured" if plain.measured else "predicted",
                **draft_count_basis(profile, s, k, 0),
            }
        )
    for k2 in range(1, top + 1):
        own = s.measured.exact(s.batch, s.context, k2) if s.measured is not None else None
        if k2 == k:
            point = {"num_draft": k, "width": profile.width or k + 1, **_cycle_fields(now)}
        elif own is not None and not own.predicted:  # another capture measured k2 here: its
            # own cycle, as the load curve's point at today's load is (issue 42: one answer)
            cycle = cycle_of(own.profile, own.scenario)
            point = {"num_draft": k2, "width": own.profile.width or k2 + 1, **_cycle_fields(cycle)}
        else:
            point = curve_point(with_drafts(profile, s, now, k, k2, "draft_count"))
        source = (
            "today"
            if k2 == k
            else f"capture {own.label}"
            if own is not None and not own.predicted
            else width_source(profile, s, point["width"])
        )
        points.append(
            point
            | {"measured": k2 == k, "verify_source": source}
            | draft_count_basis(profile, s, k, k2)
        )
    known = s.draft_ms > 0 or any(p.name == "draft" and p.cost_ms > 0 for p in s.parts)
    return DraftCurve(points, k, s.sglang, draft_known=known)


def _cycle_fields(c: Cycle) -> dict[str, float]:
    return {
        "verify_ms": c.verify_ms,
        "draft_ms": c.draft_ms,
        "overhead_ms": c.overhead_ms,
        "cycle_ms": c.cycle_ms,
        "accept_len": c.accept_len,
        "tokens_per_s": c.tokens_per_s,
    }
