"""One fix registry (issue 43 item 3): adding a fix is one entry in
``verifyprof/model/fixes/registry.py`` plus its builder. Each test registers a throwaway fix at
run time and runs ``verifyprof whatif`` on a bundled trace (or plain numbers) in-process: every
part of whatif that names fixes takes it up, with nothing else edited."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from golden_cases import run_case

from verifyprof.contracts import phases
from verifyprof.model.decision.change import Change
from verifyprof.model.fixes import registry
from verifyprof.model.fixes.base import Skip, edited, predicted
from verifyprof.model.fixes.registry import Fix

ROOT = Path(__file__).resolve().parents[1]
DENSE_EAGER = [
    "--from",
    "traces/workload-dense-eager/trace.sqlite.gz",
    "--manifest",
    "traces/workload-dense-eager/manifest.json",
]
HF = [
    "--from",
    "traces/capture-hf-assisted/capture.sqlite.gz",
    "--manifest",
    "traces/capture-hf-assisted/manifest.json",
]
PLAIN = ["--verify-ms", "30", "--accept-len", "2", "--hardware", "h200", "--model", "kimi-k2"]
PLAIN += ["--tp", "8", "--num-draft", "3"]
NAME = "overlap_throwaway"
DRAFT_COUNTS = {"fewer_draft_tokens", "more_draft_tokens"}


def removing(*taken: str, share: float = 0.5):
    """A builder removing ``share`` of each phase in ``taken`` from the verify, at no cost."""

    def build(profile, s, now):
        v = profile.verify
        deltas = {p: -share * v.phases_ms[p] for p in taken if v.phases_ms.get(p, 0.0) > 0}
        if not deltas:
            raise Skip(f"no {' or '.join(taken)} in the verify")
        return predicted(NAME, edited(profile, deltas), s, now, [f"{share:.0%} of it goes"])

    return build


def register(monkeypatch, build, **fields) -> None:
    monkeypatch.setattr(registry, "FIXES", (*registry.FIXES, Fix(NAME, build, **fields)))


def whatif(*args: str) -> dict:
    return run_case(["whatif", *args, "--json"])


def names(doc: dict, key: str) -> list[str]:
    return [c["name"] for c in doc[key]]


def test_a_registered_fix_is_ranked_and_its_phase_is_no_longer_unaddressed(monkeypatch):
    before = whatif(*DENSE_EAGER)
    assert "attention" in [u["phase"] for u in before["unaddressed"]]
    register(monkeypatch, removing("attention"), shrinks=("attention",))
    after = whatif(*DENSE_EAGER)
    assert NAME in names(after, "candidates")
    assert "attention" not in [u["phase"] for u in after["unaddressed"]]


def test_a_registered_fix_is_asked_for_by_name(monkeypatch):
    register(monkeypatch, removing("attention"), shrinks=("attention",))
    assert names(whatif(*DENSE_EAGER, "--candidate", NAME), "candidates") == [NAME]


def test_a_registered_fix_leaves_its_exclusive_groups_alternatives_out_of_the_plan(monkeypatch):
    """All the attention gone, at no cost, is stacked before the draft count: in the draft
    count's group, no draft count is stacked after it; outside it, one is."""
    gone = removing("attention", share=1.0)
    register(monkeypatch, gone, shrinks=("attention",), exclusive=("draft_count",))
    plan = names(whatif(*DENSE_EAGER), "plan")
    assert NAME in plan and not DRAFT_COUNTS & set(plan)
    register(monkeypatch, gone, shrinks=("attention",))
    plan = names(whatif(*DENSE_EAGER), "plan")
    assert NAME in plan and DRAFT_COUNTS & set(plan)


def test_a_registered_fix_graphing_a_part_that_syncs_with_the_host_is_blocked(monkeypatch):
    """Transformers' assisted generation drafts with host syncs: a graph of the draft waits."""
    register(monkeypatch, removing("elementwise"), graphs=("draft",))
    fix = next(c for c in whatif(*HF)["candidates"] if c["name"] == NAME)
    assert "host syncs per draft step" in fix["blocked_by"][0]
    register(monkeypatch, removing("elementwise"))
    fix = next(c for c in whatif(*HF)["candidates"] if c["name"] == NAME)
    assert "blocked_by" not in fix


@pytest.mark.parametrize("needs_trace", [True, False])
def test_plain_numbers_rank_a_registered_fix_only_where_it_needs_no_trace(monkeypatch, needs_trace):
    register(monkeypatch, removing("attention"), shrinks=("attention",), needs_trace=needs_trace)
    doc = whatif(*PLAIN)
    assert (NAME in names(doc, "skipped")) is needs_trace
    assert (NAME in names(doc, "candidates")) is not needs_trace


def test_the_contracts_spell_no_fix_name():
    """The contracts are below the model: the fixes that shrink a phase are the registry's."""
    text = "\n".join(p.read_text() for p in (ROOT / "verifyprof" / "contracts").rglob("*.py"))
    quoted = set(re.findall(r"[\"']([\w:]+)[\"']", text))
    assert quoted & set(registry.names()) == set()


def test_every_fix_names_a_phase_and_a_part_that_exist_once():
    fixes = registry.FIXES
    assert len({f.name for f in fixes}) == len(fixes)
    assert {p for f in fixes for p in f.shrinks} <= set(phases.ALL)
    assert {p for f in fixes for p in f.graphs} <= {"verify", "draft"}


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("draft_graph", [False, True])
def test_every_fix_compare_applies_for_a_change_is_registered(fused, draft_graph):
    change = Change(graph=True, fused=fused, draft_graph=draft_graph, draft_fused=fused)
    assert change.fixes and set(change.fixes) <= set(registry.names())


@pytest.mark.parametrize("speculative_only", [True, False])
def test_plain_decoding_along_the_plan_takes_a_registered_fix_unless_speculative_only(
    monkeypatch, speculative_only
):
    """Plain decoding beside each plan line has the plan's fixes so far that a decode step has:
    a speculative-only one leaves its rate where the line above left it."""
    gone = removing("attention", share=1.0)
    register(monkeypatch, gone, shrinks=("attention",), speculative_only=speculative_only)
    doc = whatif(*DENSE_EAGER)
    line = names(doc, "plan").index(NAME)
    plain = doc["plain_decoding"]
    along = [plain["tokens_per_s"], *plain["tokens_per_s_along_plan"]]
    assert (along[line + 1] == along[line]) is speculative_only
