"""Loads that exist (issue 34 item 2): every load-curve point fits the GPU or gets no rate,
today's batch is the trace's, and a context of zero tokens is refused, on the bundled H200
workload trace (batch 1, context 512, a 16 x 2048 model on one H200)."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import verifyprof

EAGER = Path(__file__).resolve().parents[1] / "traces" / "workload-dense-eager"


def whatif(*args: str):
    return verifyprof("whatif", str(EAGER), *args)


def test_a_load_whose_kv_cache_cannot_fit_gets_no_rate():
    proc = whatif("--batch", "1,512", "--context", "512,1000000", "--json")
    assert proc.returncode == 0, proc.stderr
    load = json.loads(proc.stdout)["load_curve"]
    contexts = [c["context"] for c in load["contexts"]]
    assert 1e6 not in contexts and 512.0 in contexts
    assert any("1e+06" in n and "do not fit" in n for n in load["notes"])


def test_the_explicit_batches_are_checked_like_the_default_ones():
    proc = whatif("--batch", "1,8,100000", "--context", "512", "--json")
    load = json.loads(proc.stdout)["load_curve"]
    (curve,) = [c for c in load["contexts"] if c["context"] == 512.0]
    assert [r["batch"] for r in curve["rows"]] == [1, 8]
    assert any(n.startswith("batch 100000 at context 512") for n in load["notes"])


def test_one_batch_that_contradicts_the_trace_is_refused_in_one_line():
    proc = whatif("--batch", "100000")
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert "--batch 100000" in line and "batch 1" in line and "--batch 1,100000" in line


def test_the_traces_own_batch_given_again_is_taken():
    assert whatif("--batch", "1").returncode == 0


def test_a_context_of_zero_tokens_is_refused_not_taken_as_unset():
    for args in (("--context", "0"), ("--batch", "1,8", "--context", "0,512")):
        proc = whatif(*args)
        assert proc.returncode == 2
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith("verifyprof: error: --context 0")


def test_one_batch_at_a_context_that_cannot_fit_gets_no_rate_and_says_why():
    """Before, batch 1 (today's) was exempt as the load that ran, at any --context: batch 1 at
    context 1e9 printed a rate. Today's load ran at the trace's context, not the one given."""
    proc = whatif("--batch", "1", "--context", "1e9", "--json")
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    assert shown["load_curve"] is None
    why = shown["load_curve_skipped"]
    assert why.startswith("no load curve: batch 1 at context 1e+09: the weights and the KV cache")
    console = whatif("--batch", "1", "--context", "1e9")
    assert console.returncode == 0 and "tok/s" not in console.stdout.split("Load:")[1]


def test_todays_load_at_its_own_context_keeps_its_rate_when_named():
    load = json.loads(whatif("--batch", "1", "--context", "512", "--json").stdout)["load_curve"]
    assert [c["context"] for c in load["contexts"]][0] == 512.0
