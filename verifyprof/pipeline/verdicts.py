"""What a resolved run answers: its ranking (every fix, with the load curve), its verdict (the
line under ``breakdown``'s tables and in ``whatif --json``) and which steps the verdict's numbers
are."""

from __future__ import annotations

from dataclasses import dataclass

from verifyprof.contracts.errors import NoStepsError
from verifyprof.pipeline.resolve import Resolved


def ranking_of(resolved: Resolved):
    """The ranking of a resolved run (None without an accept length)."""
    from verifyprof.model.decision.candidates import rank_candidates
    from verifyprof.model.decision.whatif import with_load

    p = resolved.prepared
    if p is None:
        return None
    ranking = rank_candidates(p.profile, p.scenario, resolved.options.candidates or None)
    ranking.dilation, ranking.profiled_tps = p.dilation, p.profiled_tps
    ranking.unprofiled_tps, ranking.rates = p.unprofiled_tps, p.rates
    ranking.profile.notes.extend(resolved.notes)
    return with_load(ranking, resolved.options, p.manifest)  # at the state the verdict decides


def verdict_json(resolved: Resolved, ranking=None) -> dict:
    """The verdict as ``whatif --json`` renders it: ``verdict`` (the line the console prints)
    and ``verdict_parts`` (the typed Verdict's parts; None without a plan). ``ranking``: the
    run's, when made already; else only what the verdict needs is made (the candidates and the
    plan it names, not the load curve nor the ranking's notes)."""

    from verifyprof.model.decision.candidates import rank_candidates

    p = resolved.prepared
    if ranking is None and p is not None:
        ranking = rank_candidates(p.profile, p.scenario, resolved.options.candidates or None)
    if ranking is not None:
        return {"verdict": ranking.verdict.text(), "verdict_parts": ranking.verdict.to_json()}
    return {"verdict": unranked_verdict(resolved), "verdict_parts": None}


def unranked_verdict(resolved: Resolved) -> str | None:
    """The verdict without a plan (no accept length): the story's step in words, on the device
    whatif would model, and how to get the plan; None without a story."""
    from verifyprof.model.decision.verdict import step_words

    if resolved.story is None:
        return None
    try:
        profile = resolved.profile()
    except NoStepsError:  # --step draft on a trace without verify steps: no verdict
        return None
    return step_words(profile) + (
        " Give an accept length (--accept-len or a capture manifest) for the plan of fixes."
    )


@dataclass(frozen=True)
class VerdictScope:
    """Which steps the verdict's numbers are: the mean of the modelled group's steps on one
    device (the critical one, as whatif models it), of the devices the group ran on."""

    device: int
    rank: int
    steps: int
    devices: int

    def words(self) -> str:
        who = f"rank {self.rank}" if self.rank >= 0 else f"device {self.device}"
        n = f"{self.steps} step{'s' if self.steps != 1 else ''}"
        if self.devices <= 1:
            return f"the mean of {n}"
        return f"{who}'s mean of {n}: the critical one of {self.devices} devices, whatif's"


def verdict_scope(resolved: Resolved) -> VerdictScope | None:
    """The steps the verdict describes; None without a verify group."""
    if resolved.story is None:
        return None
    profile = resolved.prepared.profile if resolved.prepared is not None else resolved.profile()
    v = profile.verify
    return VerdictScope(int(v.device), int(v.rank), int(v.steps), int(profile.devices))
