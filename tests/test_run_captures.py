"""Several captures and plain numbers are runs too (issue 43 item 1): ``open_run(captures,
options, captures=True)`` is today's run with every other capture a member, each read once, its
ranking, verdict and load curve of their one model; ``open_run([], options)`` answers plain
numbers through the same members. On the real H200 captures of ``bench/results/load_mha_h200_3``
(C1, C8, C64) and the MoE ``capture --batches`` folder of ``bench/results/moe_spec_h100``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import verifyprof

from verifyprof.model.decision.plain_numbers import plain_numbers
from verifyprof.pipeline import WhatifOptions, open_run, reading

ROOT = Path(__file__).resolve().parents[1]
MHA3 = ROOT / "bench" / "results" / "load_mha_h200_3"
CAPTURES = [str(MHA3 / c) for c in ("C1", "C8", "C64")]
MHA_MODEL = str(ROOT / "bench" / "models" / "hf-chain-7b-mha.toml")
BATCHES = ROOT / "bench" / "results" / "moe_spec_h100" / "captures"  # batch-1, batch-8
MOE_MODEL = str(ROOT / "bench" / "models" / "moe-spec-v2lite.toml")
PLAIN = WhatifOptions(verify_ms=15, accept_len=2.0, baseline_tps=82)


@pytest.fixture
def reads(monkeypatch) -> list[str]:
    """Every input the pipeline reads (a trace broken down, read whole, or a breakdown JSON)."""
    seen: list[str] = []
    for name in ("breakdown", "load", "read_breakdown_json"):
        real = getattr(reading, name)

        def counted(source, *a, _real=real, **kw):
            seen.append(str(source))
            return _real(source, *a, **kw)

        monkeypatch.setattr(reading, name, counted)
    return seen


def test_a_batches_folder_is_one_run_whose_members_are_its_captures_each_read_once(reads):
    run = open_run([str(BATCHES)], WhatifOptions(model=MOE_MODEL), captures=True)
    assert [m.sources[0] for m in run.members] == [
        str(BATCHES / "batch-1"),
        str(BATCHES / "batch-8"),
    ]
    assert run.members[0] is run  # today's run is the first capture's
    ranking, verdict, (load, _) = run.ranking, run.verdict, run.load
    assert ranking is not None and load is not None
    assert verdict["verdict"] == ranking.verdict.text()
    assert any(n.startswith("one model from 2 capture(s)") for n in load.notes)
    assert [sum(r.startswith(m.sources[0]) for r in reads) for m in run.members] == [1, 1]


def test_several_captures_give_the_verdict_of_their_one_model_even_before_the_ranking(reads):
    o = WhatifOptions(accept_len=1.2, model=MHA_MODEL)
    run = open_run(CAPTURES, o, captures=True)
    verdict = run.verdict["verdict"]  # asked first: still every capture's model, not C1's alone
    assert verdict == run.ranking.verdict.text()
    assert verdict != open_run([CAPTURES[0]], o).verdict["verdict"]
    assert len(reads) == 4  # C1, C8, C64 once each, and C1 again for the run of C1 alone


def test_the_cli_whatif_of_several_captures_prints_the_runs_ranking():
    o = WhatifOptions(source=CAPTURES[0], accept_len=1.2, model=MHA_MODEL)
    want = open_run(CAPTURES, o, captures=True).ranking.to_json()
    out = verifyprof("whatif", *CAPTURES, "--accept-len", "1.2", "--model", MHA_MODEL, "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["verdict"] == want["verdict"] and got["load_curve"] == want["load_curve"]


def test_plain_numbers_are_a_run_of_no_inputs_with_the_same_members():
    run = open_run([], PLAIN)
    assert run.ranking.to_json() == plain_numbers(PLAIN)
    assert run.verdict["verdict"] == plain_numbers(PLAIN)["verdict"]
    assert run.verdict["verdict"].startswith("cycle 15.000 ms (verify 15.000 + draft 0.000")
    assert run.load == (None, None)  # no --batch list, --context list or --model: no curve asked


def test_plain_numbers_give_their_load_curve_as_the_run_s_load():
    o = WhatifOptions(
        verify_ms=15, accept_len=2.0, num_draft=3, batches=(1, 8), model=MHA_MODEL, hardware="h200"
    )
    load, skipped = open_run([], o).load
    assert skipped is None and [row["batch"] for row in load["contexts"][0]["rows"]] == [1, 8]
