"""What changed between two runs, in the model's terms, and the prediction of that change.

``compare`` checks BEFORE's prediction of the change AFTER shows: graph launches appearing means
CUDA graphs; the kernel count falling with fused (Triton) kernels means torch.compile or fusion;
another verify width means another draft count; no verify steps left means speculation off. A
change is applied to BEFORE's state as the fixes that model it, in that order, then the draft
count, so several changes at once (compile plus another k) are one prediction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from verifyprof.model.cycle.throughput import Cycle
from verifyprof.model.decision.candidates import _builders
from verifyprof.model.fixes.base import Candidate, Scenario, Skip, cycle_of
from verifyprof.model.fixes.cycle import plain_state
from verifyprof.model.fixes.draft import accept_at, at_drafts
from verifyprof.model.inputs.profile import VerifyProfile
from verifyprof.model.inputs.step_group import StepGroup

FUSED_FALL = 0.8  # a verify keeping under 80% of its kernels, as graphs: fused


@dataclass
class Change:
    """The changes seen from BEFORE to AFTER."""

    graph: bool = False  # the verify became CUDA graph replays
    fused: bool = False  # ... with fewer, fused kernels (torch.compile)
    draft_graph: bool = False  # the draft became replays too
    draft_fused: bool = False
    widths: tuple[int, int] | None = None  # verify width before, after
    speculation_off: bool = False
    words: list[str] = field(default_factory=list)

    @property
    def fixes(self) -> tuple[str, ...]:
        if self.fused and self.draft_graph:
            return ("torch_compile",)
        names = []
        if self.graph:
            names.append("graph_fusion_verify" if self.fused else "cuda_graph_verify")
        if self.draft_graph:
            names.append("graph_fusion_draft" if self.draft_fused else "cuda_graph_draft")
        return tuple(names)

    @property
    def modelled(self) -> bool:
        return bool(self.fixes or self.widths or self.speculation_off)


def _became_graph(before: StepGroup | None, after: StepGroup | None) -> tuple[bool, bool]:
    if before is None or after is None or before.mode == "graph" or after.mode != "graph":
        return False, False
    return True, after.kernels < FUSED_FALL * before.kernels


def detect(before: VerifyProfile, after: VerifyProfile, triton_appeared: bool = False) -> Change:
    """The change from ``before`` to ``after`` (``after`` may be a plain-decoding profile)."""
    change = Change()
    if after.width == 1 and after.verify.name.endswith("decode") and before.width != 1:
        change.speculation_off = True
        change.words.append("speculation turned off (AFTER has decode steps and no verify)")
    graph, fused = _became_graph(before.verify, after.verify)
    fused = graph and (fused or triton_appeared)
    change.graph, change.fused = graph, fused
    if graph:
        change.words.append(
            f"verify eager -> {'fused graphs (compiled)' if fused else 'CUDA graph replays'}"
            f" ({before.verify.kernels:.0f} -> {after.verify.kernels:.0f} kernels,"
            f" {before.verify.graph_launches:.0f} -> {after.verify.graph_launches:.0f} graph"
            " launches)"
        )
    dgraph, dfused = _became_graph(before.draft_group, after.draft_group)
    change.draft_graph, change.draft_fused = dgraph, dgraph and (dfused or triton_appeared)
    if dgraph:
        change.words.append("draft eager -> graph replays" + (" (fused)" if dfused else ""))
    if not change.speculation_off and before.width and after.width and before.width != after.width:
        change.widths = (before.width, after.width)
        change.words.append(f"verify width {before.width} -> {after.width} (draft count)")
    return change


@dataclass
class ChangePrediction:
    cycle: Cycle
    applied: list[str]
    skipped: list[str]


def predict_change(profile: VerifyProfile, s: Scenario, change: Change) -> ChangePrediction:
    """BEFORE's state after the change: the fixes that model it, then the new draft count (or
    plain decoding)."""
    builders = dict(_builders())
    applied, skipped = [], []
    if change.speculation_off:
        profile, s, source = plain_state(profile, s)
        applied.append(f"no_speculation ({source})")
    for name in change.fixes:
        try:
            cand: Candidate = builders[name](profile, s, cycle_of(profile, s))
        except Skip as why:
            skipped.append(f"{name}: {why}")
            continue
        profile, s = cand.profile or profile, cand.scenario or s
        applied.append(name)
    if change.widths and not change.speculation_off:
        k = s.num_draft or change.widths[0] - 1
        k2 = max(change.widths[1] - 1, 1)
        tau, _ = accept_at(profile, s, k, k2)
        profile, s, _ = at_drafts(profile, s, k, k2, tau)
        applied.append(f"{k2} drafts (accept length {tau:.2f})")
    return ChangePrediction(cycle_of(profile, s), applied, skipped)
