"""``report CAP1 CAP2 ...``: several captures of one program make the one model ``whatif``
makes of them, and the page shows it as whatif's screen does: every point of the draft-count
and load curves with its basis and band, and where the load curve turns extrapolated, the
capture that would measure it. On the real H200 captures of ``bench/results/load_mha_h200``
(C1: batch 1, C8: batch 8, C1L: context 2048, C1k1: one draft), the pages opened in the real
headless Chromium."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import browser
import pytest
from cli_helpers import verifyprof
from open_counts import counted_run

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "bench" / "results" / "load_mha_h200"
C1, C8, C1L, C1K1 = (RUNS / name for name in ("C1", "C8", "C1L", "C1k1"))
MODEL = ROOT / "bench" / "models" / "hf-chain-7b-mha.toml"
LOAD = ("--model", str(MODEL), "--batch", "1,2,4,8,16,64", "--context", "512,2048")


def report_json(*args: str) -> dict:
    proc = verifyprof("report", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("captures")


@pytest.fixture(scope="module")
def page(workdir) -> tuple[dict, browser.Page, str]:
    """``report C1 C8`` over two contexts: its numbers (--json) and its page in Chromium."""
    out = workdir / "c1-c8.html"
    shown = report_json(str(C1), str(C8), *LOAD, "-o", str(out), "--quiet")
    return shown, browser.load(out, workdir, probe=True), out.read_text()


def contexts(shown: dict) -> list[dict]:
    return shown["whatif"]["load_curve"]["contexts"]


def band(value: float | None) -> str:
    return f"+/-{value:.0%}" if value else "-"


def basis(r: dict) -> str:
    """A point's or range's basis as whatif prints it: ``measured``, ``roofline +/-23%``."""
    return r["basis"] if r["basis"] == "measured" else f"{r['basis']} {band(r['band'])}"


def test_several_captures_make_the_model_whatif_makes_of_them(page):
    whatif = verifyprof("whatif", str(C1), str(C8), *LOAD, "--json")
    assert whatif.returncode == 0, whatif.stderr
    assert page[0]["whatif"] == json.loads(whatif.stdout)


def test_the_page_names_the_captures_its_model_rests_on():
    shown = report_json(str(C1), str(C8), str(C1L), str(C1K1), *LOAD)
    (note,) = [n for n in shown["notes"] if "captures of one program" in n]
    assert note.endswith("C1, C8, C1L, C1k1")


def test_each_load_row_shows_its_basis_and_band(page):
    shown, browsed, _ = page
    tables = browsed.tables()
    for i, curve in enumerate(contexts(shown)):
        table = tables[f"load-{i}"]
        assert [c.text for c in table.column("basis")] == [r["basis"] for r in curve["rows"]]
        assert [c.text for c in table.column("band")] == [band(r["band"]) for r in curve["rows"]]


def test_the_best_k_shows_the_other_k_its_band_cannot_tell_from_it(page):
    shown, browsed, _ = page
    table = browsed.tables()["load-0"]
    for cell, row in zip(table.column("best_k"), contexts(shown)[0]["rows"]):
        ks = row["best_num_draft_set"]
        assert cell.text.startswith(str(row["best_num_draft"]))
        assert (f"({ks[0]}-{ks[-1]})" in cell.text) == (len(ks) > 1)


def test_each_draft_count_shows_its_basis_and_band(page):
    shown, browsed, _ = page
    points = shown["whatif"]["draft_curve"]["points"]
    table = browsed.tables()["drafts"]
    assert [c.text for c in table.column("basis")] == [p["basis"] for p in points]
    assert [c.text for c in table.column("band")] == [band(p["band"]) for p in points]
    assert {"measured", "extrapolated"} <= {p["basis"] for p in points}  # C1 measured k = 4


def test_the_extrapolated_part_names_the_capture_that_measures_it(page):
    shown, _, text = page
    for i, curve in enumerate(contexts(shown)):
        assert curve["extrapolated_from_batch"] is not None  # batch 16 and 64: past C8
        found = re.search(rf'data-key="measure-{i}">([^<]*)<', text)
        # the page escapes it (the program's own arguments are shell-quoted)
        assert found is not None and html.unescape(found.group(1)) == curve["measure_command"]
        assert f"rows from batch {curve['extrapolated_from_batch']} on" in text


def test_a_curve_resting_only_on_its_captures_has_no_extrapolation_warning(workdir):
    out = workdir / "measured.html"
    load = ("--model", str(MODEL), "--batch", "1,2,4,8", "--context", "512")
    shown = report_json(str(C1), str(C8), *load, "-o", str(out), "--quiet")
    assert contexts(shown)[0]["extrapolated_from_batch"] is None
    assert 'data-key="extrapolated-0"' not in out.read_text()


def test_the_server_settings_say_the_basis_of_each_load_range(page):
    shown, _, text = page
    settings = shown["whatif"]["load_curve"]["server_settings"]["per_context"][0]["sglang"]
    for r in settings:
        assert f"batch {r['batches'][0]}-{r['batches'][1]} ({basis(r)})" in text
    ctx = shown["whatif"]["load_curve"]["server_settings"]["per_context"][0]
    if ctx["vllm_speculative_config"]:
        assert f"(its ranges: {', '.join(basis(b) for b in ctx['vllm_basis'])})" in text
    else:  # a range over the band limit: the config is withheld, saying why
        assert html.escape(ctx["vllm_withheld"]) in text


def test_where_the_settings_switch_k_the_page_says_what_the_engines_trackers_report(workdir):
    out = workdir / "switching.html"
    dense = ROOT / "traces" / "workload-dense-eager"
    # at accept length 1.6 today's curve switches: plain decoding to batch 128, then k = 2
    load = ("--model", "workload", "--batch", "1,8,32,128,512", "--accept-len", "1.6")
    shown = report_json(str(dense), *load, "-o", str(out), "--quiet")
    settings = shown["whatif"]["load_curve"]["server_settings"]["per_context"]
    switching = [ctx["switching"] for ctx in settings if ctx["switching"]]
    assert switching  # this run's best k changes with the batch
    text = out.read_text()
    for words in (w for found in switching for w in found.values()):
        assert html.escape(words) in text


def test_the_charts_draw_each_points_band_by_its_basis(page):
    shown, browsed, text = page
    plots = browsed.plots()
    drawn = {t["name"]: t for t in plots["drafts"]["traces"] if t["name"].endswith("(band)")}
    points = shown["whatif"]["draft_curve"]["points"]
    for basis in {p["basis"] for p in points}:
        assert drawn[f"k {basis} (band)"]["x"] == [
            p["num_draft"] for p in points if p["basis"] == basis
        ]
    chart = text.split('id="chart-load-0"')[1].split('id="chart-')[0]
    assert "error_y" in chart and '"array"' in chart


def test_a_capture_of_another_program_is_refused_in_one_line_and_no_page_is_written(tmp_path):
    out = tmp_path / "page.html"
    other = ROOT / "traces" / "capture-workload-hooks"
    proc = verifyprof("report", str(C1), str(other), *LOAD, "-o", str(out))
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert "not a capture of the same program as C1" in line and other.name in line
    assert not out.exists()


def test_one_report_of_several_captures_reads_each_capture_once(tmp_path):
    # the second campaign's C1 is the raw capture the three keep, its C8 a breakdown JSON
    # (bench/README.md, issues 32 and 43)
    raw, kept = RUNS.parent / "load_mha_h200_2" / "C1", RUNS.parent / "load_mha_h200_2" / "C8"
    cache = tmp_path / "cache"
    args = ("report", str(raw), str(kept), *LOAD, "--json")
    counted_run([raw, kept], tmp_path / "warm.json", *args, cache=cache)
    counted = counted_run([raw, kept], tmp_path / "counts.json", *args, cache=cache)
    for capture, data in ((raw, "capture.sqlite.gz"), (kept, "breakdown.json")):
        assert counted["opened"].get(f"{capture.name}/manifest.json") == 1
        assert counted["opened"].get(f"{capture.name}/{data}") == 1
