"""The verdict, computed once per run and rendered alike by the console, the JSON and the HTML
report: which step group it is about, what the step is made of, whether to speculate at all,
the plan's first fix, and every reason a part of it could not be given."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verifyprof.contracts import phases
from verifyprof.contracts.plumbing.text import counted
from verifyprof.model.cycle.throughput import Cycle
from verifyprof.model.decision.today import after_plan_words, today_answer
from verifyprof.model.fixes.registry import NO_SPECULATION
from verifyprof.model.inputs.profile import VerifyProfile

# What a dominant phase means, in the words a user acts on (one table: contracts.phases.INFO).
MEANING = {name: info.words for name, info in phases.INFO.items()}


@dataclass
class Verdict:
    """The story of one run, in parts (each a sentence or None)."""

    group: str  # the step group modelled, and why that one
    step: str  # the step in numbers and its dominant cost
    decision: str | None = None  # speculate or not (plain decoding, break-even)
    plan: str | None = None  # the first fix and the whole plan
    drafts: str | None = None  # the best number of drafts
    not_addressed: str | None = None
    reasons: list[str] = field(default_factory=list)  # why a part could not be given
    warnings: list[str] = field(default_factory=list)
    # what the user gave that the run contradicts, or a rate that disagrees with the others:
    # one line each, shown under the verdict
    cautions: list[str] = field(default_factory=list)

    def text(self) -> str:
        parts = [self.step, self.decision, self.plan, self.drafts, self.not_addressed]
        line = " ".join(p for p in parts if p)
        if self.reasons:
            line += " " + " ".join(r if r.endswith(".") else r + "." for r in self.reasons)
        return line

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "step": self.step,
            "decision": self.decision,
            "plan": self.plan,
            "drafts": self.drafts,
            "not_addressed": self.not_addressed,
            "reasons": self.reasons,
            "warnings": self.warnings,
            "cautions": self.cautions,
        }


def basis_words(basis: str, traced_ms: float | None, wall_ms: float) -> tuple[str, str]:
    """Which rate a verify time is at where it is not the trace's own: (after the time, inside
    its parentheses): the unprofiled rate (the profiler's dilation taken out) or the traced run's
    own measured rate, with the traced time (what breakdown's table shows); empty otherwise."""
    if traced_ms is None or abs(traced_ms - wall_ms) <= 5e-4 * max(traced_ms, 1e-9):
        return "", ""
    rate = "the unprofiled rate" if basis == "unprofiled" else "the traced run's own measured rate"
    return f" at {rate}", f"; {traced_ms:.3f} ms as traced"


def step_words(
    profile: VerifyProfile, basis: str = "traced", traced_ms: float | None = None
) -> str:
    """The verify step and what it is made of; shares are of the step's cost (its wall less
    other steps' GPU work), as everywhere in verifyprof's verdicts. A time not at the trace's
    rate (``basis``, ``traced_ms``: the anchored state's) says so, the traced time beside it."""
    v = profile.verify
    width = f", width {profile.width}" if profile.width else ""
    what = "verify" if "verify" in v.name.lower() else f"{v.name.replace('_', '-')} step"
    at, traced = basis_words(basis, traced_ms, v.wall_ms)
    parts = [
        f"{what} {v.wall_ms:.3f} ms{at} ({v.mode}{width}, {counted(round(v.launches), 'launch')},"
        f" {counted(round(v.kernels), 'kernel')}{traced})"
    ]
    if v.other_work_ms > 0.01 * v.wall_ms:
        parts.append(
            f"its window is {v.window_ms:.3f} ms, {v.other_work_ms:.3f} ms of it other steps' GPU"
            " work"
        )
    top = sorted(v.phases_ms.items(), key=lambda kv: kv[1], reverse=True)[:2]
    if top and v.wall_ms > 0:
        phase, t = top[0]
        words = f"{t / v.wall_ms:.0%} of its cost {phase}: {MEANING.get(phase, phase)}"
        if len(top) > 1 and top[1][1] > 0.1 * v.wall_ms:
            words += f"; then {top[1][1] / v.wall_ms:.0%} {top[1][0]}"
        parts.append(words)
    return "; ".join(parts) + "."


def plan_words(now: Cycle, plan: list[Any], plain: Any | None) -> str:
    """The plan in one sentence. It leads with turning speculation off where plain decoding wins
    today and after; a speculative fix that leaves the rate below plain decoding's today is not
    called the first fix (the plan is named whole, with where speculation passes plain)."""
    if not plan:
        return f"No modelled fix raises {now.tokens_per_s:.1f} tok/s."
    first, names = plan[0], [step.candidate.name for step in plan]
    if first.candidate.name == NO_SPECULATION:
        line = f"First: turn speculation off -> {first.cumulative_tps:.1f} tok/s"
        if len(plan) > 1:
            line += (
                f"; then {', '.join(names[1:])} on plain decoding ->"
                f" {plan[-1].cumulative_tps:.1f} tok/s"
            )
        return line + "."
    off = names[-1] == NO_SPECULATION
    below = plain is not None and first.cumulative_tps < plain.tokens_per_s
    if below:
        passes = next(
            (i for i, step in enumerate(plan, 1) if step.cumulative_tps >= plain.tokens_per_s),
            None,
        )
        line = f"The plan: {', '.join(names)} -> {plan[-1].cumulative_tps:.1f} tok/s" + (
            f" (speculation passes plain decoding's {plain.tokens_per_s:.1f} at fix {passes})"
            if passes
            else ""
        )
        return line + "."
    line = (
        f"First fix: {first.candidate.name} -> {first.cumulative_tps:.1f} tok/s"
        f" ({first.cumulative_tps / now.tokens_per_s - 1:+.1%} over {now.tokens_per_s:.1f})"
    )
    if len(plan) > 1:
        line += f"; the whole plan ({counted(len(plan) - off, 'fix', 'fixes')}" + (
            ", then speculation off" if off else ""
        )
        line += f") -> {plan[-1].cumulative_tps:.1f} tok/s"
    return line + "."


MEASURE_PLAIN = (
    'verifyprof capture --decode-cmd "<the program with speculation off>" -- <the program>'
    " (or whatif --baseline-tps <its rate>)"
)


def decision_words(plain: Any, curve: Any = None) -> str:
    """Speculate or not: today's answer first, agreeing with today's draft-count curve (the k to
    speculate with, and whether today's k loses), then what the plan's fixes change, on a
    sentence of its own; then both in numbers. Led by the unmeasured assumption where the answer
    flips with it."""
    spec = plain.spec
    if plain.unmeasured_flip:
        other, alt = plain.alternative
        lead = (
            f"Speculate or not depends on how the program runs plain decoding, which was not"
            f" measured: {plain.mode} ({plain.evidence}) it would run {plain.tokens_per_s:.1f}"
            f" tok/s, {other} {alt:.1f}, against {spec.tokens_per_s:.1f} speculating; measure it:"
            f" {MEASURE_PLAIN}"
        )
    else:
        answer = today_answer(plain, curve)
        change = after_plan_words(answer, plain)
        lead = answer.words + (f". {change}" if change else "")
    today = (
        f"Today: speculating {spec.tokens_per_s:.1f} tok/s against plain decoding's"
        f" {plain.tokens_per_s:.1f} tok/s ({plain.decode_ms:.3f} ms per step, {plain.source})"
    )
    if plain.unmeasured_flip:
        return ". ".join((lead, *_after_plan(plain))) + "."
    if plain.flips:  # decided on the evidence for plain decoding's mode; the other mode named
        other, alt = plain.alternative
        today += (
            f"; run {other}, plain decoding would make {alt:.1f} tok/s and the answer would flip:"
            f" measure it with {MEASURE_PLAIN}"
        )
    return ". ".join((lead, today + _break_even(plain), *_after_plan(plain))) + "."


def accept_reach(at: float, most: float | None) -> str:
    """A break-even accept length that no cycle can reach, said so (tables print it beside)."""
    if at < 1.0:
        return "below 1: pays at any accept length"
    if most is not None and at > most:
        return f"above the {most:g} that {counted(most - 1, 'draft')} can accept: unreachable"
    return ""


def _break_even(plain: Any) -> str:
    """Where speculation starts to pay, said only as something a cycle can reach: an accept
    length above what its drafts can accept, or below 1, is named as such."""
    spec, at = plain.spec, plain.break_even_accept_len
    most = plain.max_accept_len
    cycle = f"a {plain.break_even_cycle_ms:.3f} ms cycle at accept length {spec.accept_len:.2f}"
    if plain.speculation_loses:
        if most is not None and at > most:
            return (
                f"; no accept length makes this cycle pay: it would take {at:.2f}, above the"
                f" {most:g} its {counted(most - 1, 'draft')} can accept; it pays below {cycle}"
            )
        return (
            f"; speculation pays only above accept length {at:.2f} at this cycle, or below {cycle}"
        )
    if at < 1.0:
        return "; it pays at any accept length: this cycle is shorter than a plain decode step"
    return f"; break-even accept length {at:.2f}"


def _after_plan(plain: Any) -> list[str]:
    """Both after the plan's fixes (plain decoding with those that apply to a decode step)."""
    if not plain.along_plan or plain.spec_after_plan is None:
        return []
    if plain.own_plan:
        return [
            f"After the fixes: speculating at best {plain.spec_after_plan:.1f} tok/s (its own"
            f" plan) against plain decoding's {plain.along_plan[-1]:.1f} tok/s (the fixes that"
            " apply to a decode step)"
        ]
    line = (
        f"After the plan: speculating {plain.spec_after_plan:.1f} tok/s against plain decoding's"
        f" {plain.along_plan[-1]:.1f} tok/s with the same fixes"
    )
    if plain.wins_from is not None and (plain.speculation_loses or plain.wins_from > 1):
        line += (
            f" (speculation wins from plan step {plain.wins_from}, against"
            f" {plain.along_plan[plain.wins_from - 1]:.1f})"
        )
    return [line]


def unaddressed_words(unaddressed: list[dict[str, Any]]) -> str | None:
    if not unaddressed:
        return None
    worst = max(unaddressed, key=lambda u: u["ms"])
    return f"Not addressed: {worst['phase']} {worst['ms']:.3f} ms ({worst['reason']})."


def verdict(profile: VerifyProfile, now: Cycle | None, plan: list[Any], unaddressed: list) -> str:
    """The verdict text without a ranking (breakdown without an accept length)."""
    line = step_words(profile)
    if now is None:
        return (
            line + " Give an accept length (--accept-len or a capture manifest) for the plan of"
            " fixes."
        )
    return " ".join(
        x for x in (line, plan_words(now, plan, None), unaddressed_words(unaddressed)) if x
    )
