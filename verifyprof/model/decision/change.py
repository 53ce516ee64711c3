"""What changed between two runs, in the model's terms, and the prediction of that change.

``compare`` checks BEFORE's prediction of the change AFTER shows: graph launches appearing means
CUDA graphs; the kernel count falling with fused (Triton) kernels means torch.compile or fusion;
another verify width means another draft count; no verify steps left means speculation off. A
change is applied to BEFORE's state as the fixes that model it, in that order, then the draft
count, so several changes at once (compile plus another k) are one prediction. What no candidate
models (graphs taken away, another kernel count in the same mode, a phase appearing: another
model) is named too, with the numbers compare's table shows, never hidden behind a prediction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from verifyprof.model.cycle.throughput import Cycle
from verifyprof.model.fixes import registry
from verifyprof.model.fixes.base import Candidate, Scenario, Skip, cycle_of
from verifyprof.model.fixes.cycle import plain_state
from verifyprof.model.fixes.draft import accept_at, at_drafts
from verifyprof.model.inputs.profile import VerifyProfile
from verifyprof.model.inputs.step_group import StepGroup

FUSED_FALL = 0.8  # a verify keeping under 80% of its kernels, as graphs: fused
KERNELS_MOVED = 0.05  # a kernel count moving by more than 5% in the same mode: other work
PHASE_SEEN_MS = 0.01  # a phase under 10 us per step on one side: absent there
MODE_PHASES = frozenset(  # phases a mode change moves: the mode's own, not new work
    {"launch_gap", "graph_gap", "graph_launch", "host_wait", "idle", "other_work"}
)


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
    unmodelled: list[str] = field(default_factory=list)  # changes seen that no candidate models

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
    if not change.speculation_off:
        change.unmodelled = unmodelled(before, after, graph)
    return change


def unmodelled(before: VerifyProfile, after: VerifyProfile, became_graph: bool) -> list[str]:
    """The verify's changes from ``before`` to ``after`` that no candidate models, each with its
    numbers (those compare's table shows: the same mean verify step)."""
    b, a = before.verify, after.verify
    out = []
    if b.name != a.name:
        out.append(f"verify step {b.name} -> {a.name}")
    if b.mode != a.mode and not became_graph:
        out.append(
            f"verify {b.mode} -> {a.mode} ({b.graph_launches:.0f} -> {a.graph_launches:.0f} graph"
            f" launches, {b.launches:.0f} -> {a.launches:.0f} launches per step"
            + ("; no candidate models taking graphs away)" if b.mode == "graph" else ")")
        )
    fewer = a.kernels < b.kernels  # graphs with fewer kernels: the fusion a candidate models
    if not (became_graph and fewer) and abs(a.kernels - b.kernels) > KERNELS_MOVED * max(
        b.kernels, 1.0
    ):
        out.append(f"verify kernels {b.kernels:.0f} -> {a.kernels:.0f} per step")
    seen_b = {p for p, t in b.phases_ms.items() if t >= PHASE_SEEN_MS} - MODE_PHASES
    seen_a = {p for p, t in a.phases_ms.items() if t >= PHASE_SEEN_MS} - MODE_PHASES
    if seen_a - seen_b:
        out.append("phases appeared: " + ", ".join(sorted(seen_a - seen_b)))
    if seen_b - seen_a:
        out.append("phases vanished: " + ", ".join(sorted(seen_b - seen_a)))
    if before.devices != after.devices:
        out.append(f"devices {before.devices} -> {after.devices}")
    return out


def same_words(before: VerifyProfile, after: VerifyProfile) -> str:
    """What stayed the same, with its values: the verify's mode, kernel count and width."""
    b, a = before.verify, after.verify
    width = "-" if before.width is None else str(before.width)
    return (
        f"the verify's mode ({b.mode}), kernels per step ({b.kernels:.0f} -> {a.kernels:.0f},"
        f" within {100 * KERNELS_MOVED:.0f}%) and width ({width}) are the same"
    )


@dataclass
class ChangePrediction:
    cycle: Cycle
    applied: list[str]
    skipped: list[str]


def predict_change(profile: VerifyProfile, s: Scenario, change: Change) -> ChangePrediction:
    """BEFORE's state after the change: the fixes that model it, then the new draft count (or
    plain decoding)."""
    builders = dict(registry.builders())
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
