"""The JSON outputs against their documented form (README: schemas verifyprof.breakdown/1,
verifyprof.kernels/1, verifyprof.whatif/1). Fields are only ever added, so a form lists what
must be there and its type; extra keys pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from golden_cases import run_case

NUM = (int, float)
OPT_NUM = (int, float, type(None))
STATS = {"mean": NUM, "p50": NUM, "p90": NUM}

BREAKDOWN = {
    "schema": "verifyprof.breakdown/1",
    "verdict": (str, type(None)),  # the console's verdict line, as whatif --json has it
    "verdict_parts": (dict, type(None)),
    "trace": {
        "path": [str],
        "format": str,
        "kernels": int,
        "copies": int,
        "ranges": int,
        "devices": [{"device": int, "name": (str, type(None))}],
        "ranks": [int],
        "linked_ops": int,
        "unlinked_ops": int,
        "warnings": [str],
    },
    "options": {"range": (str, type(None)), "whole_trace": bool, "taxonomy": str},
    "phases": [str],
    "steps": [
        {
            "name": str,
            "text": str,
            "attrs": dict,
            "index": int,
            "rank": int,
            "device": int,
            "pid": int,
            "tid": int,
            "start_ns": int,
            "end_ns": int,
            "wall_ns": int,
            "gpu_span_ns": int,
            "kernels": int,
            "launches": int,
            "graph_launches": int,
            "mode": str,
            "phases": dict,
            "totals": dict,
            "counts": dict,
        }
    ],
    "summary": {
        "unit": "ns",
        "collectives": (dict, type(None)),
        "collective_kernels": (dict, type(None)),
        "groups": [
            {
                "name": str,
                "variant": str,
                "steps": int,
                "rows": int,
                "devices": [int],
                "modes": dict,
                "wall_ns": STATS,
                "gpu_span_ns": STATS,
                "kernels": STATS,
                "launches": STATS,
                "phases": dict,
                "totals": dict,
                "median_step": {
                    "index": int,
                    "device": int,
                    "rank": int,
                    "wall_ns": int,
                    "phases": dict,
                },
                "by_rank": dict,
            }
        ],
    },
}
KERNELS = {
    "schema": "verifyprof.kernels/1",
    "unit": "ns",
    "taxonomy": str,
    "scope": str,
    "total_kernel_ns": int,
    "distinct_kernels": int,
    "step_count": int,
    "kernels": [
        {
            "name": str,
            "short_name": str,
            "phase": str,
            "count": int,
            "calls_per_step": OPT_NUM,
            "total_ns": int,
            "mean_ns": int,
            "median_ns": int,
            "min_ns": int,
            "max_ns": int,
            "share": NUM,
        }
    ],
    "by_phase": dict,
}
CANDIDATE = {
    "name": str,
    "verify_ms": NUM,
    "cycle_ms": NUM,
    "accept_len": NUM,
    "tokens_per_s": NUM,
    "gain": NUM,
    "assumptions": [str],
}
# one schema, whether the input is a trace or plain numbers (issue 33): today's cycle under
# ``current``, plain decoding, the draft-count curve and the plan beside it (null / empty where
# the input gives none)
WHATIF = {
    "schema": "verifyprof.whatif/1",
    "unit": "ms",
    "verdict": (str, type(None)),
    "verdict_parts": (dict, type(None)),
    "current": {
        "accept_len": NUM,
        "verify_ms": NUM,
        "draft_ms": NUM,
        "overhead_ms": NUM,
        "cycle_ms": NUM,
        "tokens_per_s": NUM,
        "batch_tokens_per_s": NUM,
        "basis": str,
        "source": str,
    },
    "plain_decoding": (dict, type(None)),
    "draft_curve": (dict, type(None)),
    "load_curve": (dict, type(None)),
    "plan": [dict],
    "relative_to": dict,
    "unaddressed": [dict],
    "candidates": [CANDIDATE],
    "skipped": [{"name": str, "reason": str}],
}
WHATIF_RANKING = WHATIF | {
    "current": WHATIF["current"]
    | {
        "verify_steps": int,
        "device": int,
        "mode": str,
        "width": (int, type(None)),
        "verify_phases_ms": dict,
        "notes": [str],
    },
}


def mismatches(value: Any, form: Any, where: str = "$") -> list[str]:
    """Where ``value`` departs from ``form`` (a type or tuple of types, a literal, a dict of
    required keys, or a one-element list: every item of that form)."""
    if isinstance(form, dict):
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {type(value).__name__}"]
        return [
            m
            for key, sub in form.items()
            for m in (
                mismatches(value[key], sub, f"{where}.{key}")
                if key in value
                else [f"{where}.{key}: missing"]
            )
        ]
    if isinstance(form, list):
        if not isinstance(value, list):
            return [f"{where}: expected a list, got {type(value).__name__}"]
        return [
            m for i, item in enumerate(value) for m in mismatches(item, form[0], f"{where}[{i}]")
        ]
    if isinstance(form, (type, tuple)):
        ok = isinstance(value, form) and not (
            isinstance(value, bool) and form in (int, NUM, OPT_NUM)
        )
        return [] if ok else [f"{where}: expected {form}, got {value!r}"]
    return [] if value == form else [f"{where}: expected {form!r}, got {value!r}"]


def test_the_validator_catches_a_missing_key_and_a_wrong_type():
    assert mismatches({"a": 1}, {"a": int, "b": str}) == ["$.b: missing"]
    assert mismatches({"a": [1, "x"]}, {"a": [int]}) == ["$.a[1]: expected <class 'int'>, got 'x'"]
    assert mismatches({"schema": "verifyprof.whatif/2"}, {"schema": "verifyprof.whatif/1"})


@pytest.mark.parametrize(
    "case",
    [
        "breakdown-dense-eager",
        "breakdown-whole-tracelens_b200_vllm_moe_eager_trace",
        "breakdown-whole-nsysai_mfu_2gpu_before_nsys2026",
    ],
)
def test_breakdown_json_has_its_documented_form(case):
    from golden_cases import CASES

    data = run_case(CASES[case])
    assert mismatches(data, BREAKDOWN) == []
    assert set(data["phases"]) == set(data["steps"][0]["phases"])


def test_breakdown_json_on_one_gpu_has_summary_collectives_null():
    data = run_case(["breakdown", "traces/workload-dense-eager/trace.sqlite.gz", "--json"])
    assert "collectives" in data["summary"] and data["summary"]["collectives"] is None


def test_kernels_json_has_its_documented_form():
    data = run_case(
        [
            "kernels",
            "tests/data/public/kineto/tracelens_b200_vllm_moe_eager_trace.json.gz",
            "--json",
            "--top",
            "5",
        ]
    )
    assert mismatches(data, KERNELS) == []
    assert len(data["kernels"]) == 5


def test_kernels_json_of_the_story_names_its_group():
    data = run_case(["kernels", "traces/workload-dense-eager/trace.sqlite.gz", "--json"])
    assert mismatches(data, KERNELS) == []
    group = {"name": str, "variant": str, "label": str, "mode": str, "why": str, "steps": int}
    assert mismatches(data["group"], group) == [] and data["group"]["steps"] == data["step_count"]


def test_whatif_plain_json_has_its_documented_form():
    data = run_case(
        ["whatif", "--verify-ms", "15", "--accept-len", "2.0", "--baseline-tps", "82", "--json"]
    )
    assert mismatches(data, WHATIF) == []
    assert data["current"]["tokens_per_s"] == pytest.approx(2.0 / 0.015)
    assert data["plain_decoding"]["tokens_per_s"] == pytest.approx(82.0)  # the rate it compares


def test_plain_numbers_ranked_and_a_trace_share_one_whatif_schema():
    plain = run_case(
        ["whatif", "--verify-ms", "30", "--accept-len", "2", "--num-draft", "3", "--model",
         "kimi-k2", "--hardware", "h200", "--tp", "8", "--decode-ms", "12.2", "--json"]
    )  # fmt: skip
    trace = run_case(["whatif", "--from", "traces/workload-dense-eager", "--json"])
    assert mismatches(plain, WHATIF) == []
    # the load curve after the plan's fixes is a trace's where speculate-or-not flips there;
    # plain numbers have no plan that moves their load curve
    assert set(trace) - set(plain) == {"load_curve_after_plan"}
    for key in ("plain_decoding", "draft_curve"):
        assert set(trace[key]) - set(plain[key]) == set()


def test_whatif_ranking_json_has_its_documented_form():
    data = run_case(["whatif", "--from", "traces/workload-dense-eager", "--json"])
    assert mismatches(data, WHATIF_RANKING) == []


def test_readme_documents_every_schema_key():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for schema in ("verifyprof.breakdown/1", "verifyprof.kernels/1", "verifyprof.whatif/1"):
        assert f"`{schema}`" in readme
    assert '"unit": "ms"' in readme and '"collectives": null' in readme
