"""Whole-trace labels say what the numbers are: a report's top-kernels table of the whole trace
(not "the verdict's group selected none"), its 'about' line when no model ran (not "modelled"),
compare's kernel families (of the whole trace where there are no verify ranges), and compare's
phase table naming each side's device where the two sides' critical devices differ.

On the public two-GPU nsys traces (before and after one change), run with ``--whole-trace``."""

from __future__ import annotations

import html as htmllib
import json
import re

import pytest
from cli_helpers import verifyprof
from golden_cases import PUB

from verifyprof import pipeline
from verifyprof.report import html

pytestmark = pytest.mark.public_traces

BEFORE = f"{PUB}/nsys/nsysai_mfu_2gpu_before_nsys2026.2.sqlite.gz"
AFTER = f"{PUB}/nsys/nsysai_mfu_2gpu_after_nsys2026.2.sqlite.gz"
EAGER = "traces/workload-dense-eager/trace.sqlite.gz"
GRAPH = "traces/workload-dense-graph/trace.sqlite.gz"


def paragraph(page: str, key: str) -> str:
    (text,) = re.findall(rf'<p class="[^"]*" data-key="{key}">(.*?)</p>', page, re.S)
    return htmllib.unescape(re.sub(r"<[^>]+>", "", text))


def page_of(tmp_path, data) -> str:
    out = tmp_path / "page.html"
    html.write_report(data, out)
    return out.read_text()


@pytest.fixture(scope="module")
def whole():
    """BEFORE's report with --whole-trace and no accept length: no model runs."""
    return pipeline.report(BEFORE, whole_trace=True)


def test_the_whole_traces_kernel_table_says_it_is_the_whole_trace(whole, tmp_path):
    scope = paragraph(page_of(tmp_path, whole), "kernels-scope")
    assert whole.group[0] == "whole_trace" and whole.kernels["scope"] == "whole trace"
    words = "every kernel of the trace (--whole-trace: the whole trace is the step)"
    assert scope.startswith(words)
    assert "selected none" not in scope


def test_without_a_model_the_about_line_does_not_say_modelled(whole, tmp_path):
    assert whole.ranking is None  # no accept length: no plan, no model ran
    about = paragraph(page_of(tmp_path, whole), "verdict-about")
    assert "modelled" not in about and "no model ran" in about
    assert about.startswith("about: whole_trace")


def test_with_a_model_the_about_line_is_the_verdicts_group():
    data = pipeline.report(BEFORE, whole_trace=True, accept_len=2.0)
    assert data.ranking is not None
    assert data.group_why == data.ranking.verdict.group  # the model's own words: it ran


@pytest.fixture(scope="module")
def compared() -> dict:
    return pipeline.compare(BEFORE, AFTER, whole_trace=True).to_json()


def test_compares_kernel_families_of_a_whole_trace_say_so(compared):
    families = compared["kernel_families"]
    assert families["available"] and families["scope"] == "the whole trace (no verify ranges)"
    ran = verifyprof("compare", BEFORE, AFTER, "--whole-trace")
    assert ran.returncode == 0, ran.stderr
    assert "kernel families in the whole trace (no verify ranges):" in ran.stdout
    assert "in the verify ranges" not in ran.stdout


def test_kernel_families_of_verify_ranges_say_so():
    out = pipeline.compare(EAGER, GRAPH).to_json()
    assert out["kernel_families"]["scope"] == "the verify ranges"


def test_the_phase_table_names_each_sides_device_where_they_differ(compared, tmp_path):
    b, a = compared["before"]["device"], compared["after"]["device"]
    assert b != a  # each side's critical device: the two traces' slowest are not the same one
    (note,) = [n for n in compared["notes"] if "critical" in n]
    assert f"before's numbers are device {b}'s and after's device {a}'s" in note
    ran = verifyprof("compare", BEFORE, AFTER, "--whole-trace")
    assert f"before (device {b})" in ran.stdout and f"after (device {a})" in ran.stdout
    data = pipeline.report(BEFORE, compare_with=AFTER, whole_trace=True)
    page = page_of(tmp_path, data)
    assert f'<th class="n">before (device {b})</th>' in page
    assert f'<th class="n">after (device {a})</th>' in page


def test_the_same_device_needs_no_device_columns():
    out = pipeline.compare(BEFORE, BEFORE, whole_trace=True).to_json()
    assert not [n for n in out["notes"] if "critical" in n]
    ran = verifyprof("compare", BEFORE, BEFORE, "--whole-trace", "--json")
    assert json.loads(ran.stdout)["notes"] == out["notes"]


def test_per_rank_deltas_carry_their_sign(compared):
    ran = verifyprof("compare", BEFORE, AFTER, "--whole-trace")
    rows = [r for r in compared["ranks"] if r["delta_ms"] is not None]
    assert any(r["delta_ms"] > 0 for r in rows) and any(r["delta_ms"] < 0 for r in rows)
    for r in rows:
        assert f"{r['delta_ms']:+.3f}" in ran.stdout
