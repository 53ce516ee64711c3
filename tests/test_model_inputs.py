"""Reading breakdowns for the model: which steps are the verify, and what each costs the cycle."""

from __future__ import annotations

import json

import pytest
from tracebuilder import TraceBuilder

from verifyprof.attribution.breakdown import breakdown
from verifyprof.contracts.errors import NoStepsError, VerifyprofError
from verifyprof.contracts.manifest import read_manifest
from verifyprof.contracts.ranges import ACCEPT, DRAFT, SPEC_STEP, VERIFY, range_text
from verifyprof.contracts.schema import check_header, frame_from_json
from verifyprof.model.inputs.profile import verify_profile


def profile_of(data, **options):
    """The model's reduction of a breakdown JSON document, read back as the model reads it."""
    return verify_profile(frame_from_json(data), **options)


def host_ahead_graph_loop(cycles=2):
    """Graph mode with the host ahead of the GPU: the draft range closes as soon as its graph is
    launched, the verify range opens while the draft's kernels still run (as in the workload)."""
    b = TraceBuilder()
    t = 0
    for _ in range(cycles):
        s0 = t
        b.range(range_text(DRAFT, bs=1, tokens=3, graph=1), t, t + 10_000)
        corr = b.launch(t + 2_000, t + 8_000, api="cudaGraphLaunch")
        b.kernel("nvjet_tst_draft", t + 12_000, t + 300_000, corr)  # draft GPU work ends at +300 us
        b.range(range_text(VERIFY, bs=1, tokens=4, graph=1), t + 20_000, t + 40_000)
        corr = b.launch(t + 25_000, t + 35_000, api="cudaGraphLaunch")
        b.kernel("nvjet_tst_verify", t + 301_000, t + 801_000, corr)  # verify's own 500 us
        b.range(range_text(ACCEPT, bs=1, tokens=4), t + 40_000, t + 900_000)
        corr = b.launch(t + 45_000, t + 50_000)
        b.kernel("TopKTopPSamplingFromProbKernel", t + 802_000, t + 812_000, corr)
        t += 900_000
        b.range(range_text(SPEC_STEP, bs=1, tokens=4, graph=1), s0, t)
        t += 10_000
    return breakdown(b.build()).to_json()


def test_overlapped_verify_window_is_cut_to_the_verify_s_own_time():
    data = host_ahead_graph_loop()
    raw = [s for s in data["steps"] if s["name"] == VERIFY]
    assert raw[0]["wall_ns"] == 781_000  # its window reaches back over the draft's GPU work
    profile = profile_of(data)
    assert profile.verify.wall_ms == pytest.approx(
        0.501
    )  # 300 -> 801 us: launch latency + its own kernel
    assert sum(profile.verify.phases_ms.values()) == pytest.approx(profile.verify.wall_ms)
    assert (
        raw[0]["phases"]["other_work"] == 280_000 and raw[0]["cost_ns"] == 501_000
    )  # the breakdown already cuts it


def test_cycle_parts_are_exclusive_and_add_up_to_the_spec_step():
    profile = profile_of(host_ahead_graph_loop())
    parts = profile.draft_ms + profile.verify.wall_ms + profile.accept_ms
    assert profile.cycle_ms == pytest.approx(0.9)
    assert parts == pytest.approx(profile.cycle_ms)
    assert profile.draft_ms == pytest.approx(0.300)


def test_breakdown_without_steps_is_refused():
    with pytest.raises(NoStepsError, match="breakdown has no steps"):
        check_header({"schema": "verifyprof.breakdown/1", "steps": []})


def test_breakdown_with_only_other_steps_names_them():
    b = TraceBuilder().range("verifyprof.decode bs=1", 0, 100)
    b.kernel("nvjet_tst_x", 10, 50, b.launch(1, 5))
    with pytest.raises(NoStepsError, match="no verify steps.*verifyprof.decode"):
        profile_of(breakdown(b.build()).to_json())


def test_capture_manifest_gives_results_accept_length_not_requested_options(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text(
        json.dumps(
            {
                "schema": "verifyprof.capture/1",
                "options": {"accept_len": 3.0},
                "results": {"accept_len": 2.2, "tokens_per_s": 80.0},
            }
        )
    )
    manifest = read_manifest(path)
    assert (manifest.accept_len, manifest.tokens_per_s) == (2.2, 80.0)


def test_manifest_with_a_non_numeric_accept_length_is_refused(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"results": {"accept_len": "two"}}))
    with pytest.raises(VerifyprofError, match="not a number"):
        read_manifest(path)
