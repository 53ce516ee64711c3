"""`verifyprof report`: the HTML file opened in a real headless Chromium, network off."""

from __future__ import annotations

import gzip
import html as htmllib
import json
import re
import subprocess
import sys
from pathlib import Path

import browser
import numpy as np
import pytest
from cli_helpers import verifyprof
from PIL import Image

from verifyprof import pipeline
from verifyprof.attribution.kernel_names import short_kernel_name
from verifyprof.contracts import phases
from verifyprof.contracts.schema import group_label
from verifyprof.report import html
from verifyprof.report.data import ReportData
from verifyprof.report.figures import COLOURS

ROOT = Path(__file__).resolve().parents[1]
EAGER = ROOT / "traces" / "workload-dense-eager" / "trace.sqlite.gz"
GRAPH = ROOT / "traces" / "workload-dense-graph" / "trace.sqlite.gz"
MANIFEST = EAGER.parent / "manifest.json"
HF = (
    ROOT / "traces" / "capture-hf-assisted"
)  # verify widths 1..68: the verdict's group is not first
COMPILE = ROOT / "traces" / "workload-dense-compile" / "trace.sqlite.gz"
MI300X = (
    ROOT
    / "tests"
    / "data"
    / "public"
    / "kineto"
    / "tracelens_mi300x_sglang_qwen3-8b_decode.json.gz"
)
HOSTILE = "<script>alert(1)</script>"
LONG_TEMPLATE = (  # a CUTLASS-style name: 400 characters of template arguments, no space
    "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_"
    + "x".join(["128x256_64x3"] * 30)
    + "_tn_align8>(cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::GemmShape<128,256>>::Params)"
)
LONG_WORD = "Cijk_Ailk_Bljk_BBS_BH_MT256x256x64_MI32x32x8x1_SN_" + "1LDSB0_APM1_ABV0" * 25


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("report")


@pytest.fixture(scope="module")
def dense(workdir) -> tuple[Path, pipeline.Run, ReportData]:
    """The eager trace's report, with its what-if and the graph trace as AFTER."""
    loaded = pipeline.open_run(EAGER, keep_trace=True)
    data = pipeline.report(EAGER, compare_with=GRAPH, manifest=MANIFEST)
    out = workdir / "dense.html"
    html.write_report(data, out)
    return out, loaded, data


@pytest.fixture(scope="module")
def dense_page(dense, workdir) -> browser.Page:
    return browser.load(dense[0], workdir, probe=True)


@pytest.fixture(scope="module")
def hf(workdir) -> tuple[ReportData, browser.Page]:
    """transformers' assisted generation: speculation loses, graph fixes blocked by host syncs,
    and the verify group modelled (width 5) is not the summary's first."""
    data = pipeline.report(HF / "capture.sqlite.gz", manifest=HF / "manifest.json")
    out = workdir / "hf.html"
    html.write_report(data, out)
    return data, browser.load(out, workdir, probe=True)


def cells(page: browser.Page, table: str, key: str) -> list[str]:
    """The texts of one column (data-key) of one table (data-table) in the page."""
    tables = page.tables()
    assert table in tables, f"no table {table}"
    return [c.text for c in tables[table].column(key)]


def label(group: tuple[str, str]) -> str:
    return group_label(*group)  # the one spelling: name [attributes]


def test_report_has_no_console_messages(dense_page):
    assert dense_page.console_messages == []


@pytest.mark.parametrize("name", ["compare-dense-eager-vs-graph", "load-mha-h200"])
def test_the_example_reports_open_without_console_messages(name, workdir):
    """reports/*.html as scripts/make_reports.py last wrote them, beside the one shared
    plotly.min.js it writes from the installed plotly (not tracked: issue 43)."""
    from plotly.offline import get_plotlyjs

    folder = workdir / "examples"
    folder.mkdir(exist_ok=True)
    (folder / "plotly.min.js").write_text(get_plotlyjs())
    copy = folder / f"{name}.html"
    copy.write_bytes((ROOT / "reports" / f"{name}.html").read_bytes())
    page = browser.load(copy, workdir)
    assert page.console_messages == []
    assert re.search(r'data-charts="(\d+)"', page.dom) and 'data-chart="cycles"' in page.dom


def test_console_check_sees_a_script_error(tmp_path):
    page = tmp_path / "boom.html"
    page.write_text('<html><body><script>throw new Error("boom")</script></body></html>')
    assert any("boom" in line for line in browser.load(page, tmp_path).console_messages)


def test_every_chart_is_drawn(dense, dense_page, workdir):
    dom = dense_page.dom
    charts = re.findall(
        r'<div class="vp-chart" data-chart="([^"]+)" data-rect="(\d+),(\d+),(\d+),(\d+)">', dom
    )
    names = [c[0] for c in charts]
    assert {"plan", "cycles", "drafts", "heatmap", "steps-0", "timeline", "compare"} <= set(names)
    assert f'data-charts="{len(charts)}"' in dom
    assert dom.count('class="main-svg"') >= len(charts)  # plotly drew an SVG in every chart
    bottom = max(int(y) + int(h) for _, _, y, _, h in charts)
    shot = np.asarray(
        Image.open(browser.screenshot(dense[0], workdir, bottom + 50)).convert("L"), dtype=float
    )
    for name, x, y, w, h in charts:
        region = shot[int(y) : int(y) + int(h), int(x) : int(x) + int(w)]
        assert region.size and region.std() > 10 and (region < 200).mean() > 0.01, (
            f"chart {name} looks blank"
        )


def test_blank_region_check_would_fail_on_a_blank_page(tmp_path):
    page = tmp_path / "blank.html"
    page.write_text('<html><body style="margin:0"><div style="height:400px"></div></body></html>')
    shot = np.asarray(Image.open(browser.screenshot(page, tmp_path, 400)).convert("L"), dtype=float)
    assert shot.std() < 1


def test_numbers_shown_equal_the_breakdown_json(dense, dense_page):
    document = dense[1].breakdown.to_json()
    groups = document["summary"]["groups"]  # the verdict's group is the first here too
    assert cells(dense_page, "groups", "wall-mean-ms") == [
        f"{g['wall_ns']['mean'] / 1e6:.3f}" for g in groups
    ]
    assert cells(dense_page, "groups", "wall-p50-ms") == [
        f"{g['wall_ns']['p50'] / 1e6:.3f}" for g in groups
    ]
    kernels = dense[2].kernels["kernels"]  # the verify group's
    assert cells(dense_page, "kernels", "total-ms") == [
        f"{k['total_ns'] / 1e6:.3f}" for k in kernels
    ]


def test_timeline_idle_matches_the_median_steps_phases(dense, dense_page):
    steps = dense[1].breakdown.steps
    (step,) = cells(dense_page, "timeline", "step")
    row = steps[(steps["step"] == int(step)) & (steps["device"] == 0)].iloc[0]
    idle = sorted((p, row[p]) for p in phases.OTHER + phases.IDLE if row[p])
    assert cells(dense_page, "timeline", "idle") == [
        ", ".join(f"{p} {ns / 1e6:.3f} ms" for p, ns in idle)
    ]


def test_compare_section_shows_the_verdict_and_prediction(dense_page):
    dom = dense_page.dom
    assert re.search(r"faster: verify (wall|cost) 12\.631 -&gt; 2\.202 ms", dom)
    assert cells(dense_page, "prediction", "what")[:1] == ["verify ms"]


@pytest.fixture(scope="module")
def odd_names(workdir) -> tuple[Path, browser.Page]:
    """The MI300X SGLang decode trace with its three most frequent kernels renamed: a script tag,
    a 400-character CUTLASS template and a 400-character name without a space or a bracket."""
    data = json.loads(gzip.decompress(MI300X.read_bytes()))
    kernels = [e for e in data["traceEvents"] if e.get("cat") == "kernel"]
    names = [e["name"] for e in kernels]
    top = sorted(set(names), key=names.count, reverse=True)[:3]
    renamed = dict(zip(top, (HOSTILE, LONG_TEMPLATE, LONG_WORD)))
    for event in kernels:
        event["name"] = renamed.get(event["name"], event["name"])
    trace = workdir / "odd_names_trace.json"
    trace.write_text(json.dumps(data))
    out = workdir / "odd_names.html"
    html.write_report(pipeline.report(trace, step_regex="DECODE"), out)
    return out, browser.load(out, workdir, probe=True)


def test_a_hostile_kernel_name_is_shown_as_text(odd_names):
    out, page = odd_names
    assert HOSTILE in [c.title for c in page.tables()["kernels"].column("name")]
    assert page.console_messages == []  # no alert, no script error
    assert HOSTILE not in out.read_text() and HOSTILE not in page.dom


def test_the_page_fetches_nothing(dense):
    text = dense[0].read_text()
    tags = re.findall(r"<(?:script|link|img|iframe|source|embed|object)\b[^>]*>", text, re.I)
    assert not [
        t for t in tags if re.search(r"""(?:src|href|data)\s*=\s*["']?(?:https?:)?//""", t, re.I)
    ]
    assert not re.search(
        r"<script\b[^>]*\bsrc\s*=", text
    )  # plotly.js is inline, not a file or a CDN
    head = text.split("</head>")[0]
    assert len(head) > 3_000_000 and "Plotly" in head


@pytest.fixture(scope="module")
def breakdown_only(workdir) -> tuple[ReportData, browser.Page]:
    """The graph trace's breakdown JSON as input: no accept length, so no ranking; no trace."""
    source = workdir / "graph.json"
    source.write_text(
        subprocess.run(
            [sys.executable, "-m", "verifyprof.cli", "breakdown", str(GRAPH), "--json"],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
    )
    out = workdir / "graph.html"
    data = pipeline.report(source)
    html.write_report(data, out)
    return data, browser.load(out, workdir)


def test_breakdown_json_report_says_what_it_cannot_show(breakdown_only):
    page = breakdown_only[1]
    assert "no plan: give an accept length" in page.dom and "need the trace" in page.dom
    assert page.console_messages == []


def test_report_refuses_to_write_onto_its_input(tmp_path):
    source = tmp_path / "graph.json"
    source.write_text("{}")
    proc = subprocess.run(
        [sys.executable, "-m", "verifyprof.cli", "report", str(source), "-o", str(source)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert (
        proc.returncode == 2
        and proc.stderr.strip().startswith("verifyprof: error: ")
        and "-o would overwrite an input of this command" in proc.stderr
    )
    assert source.read_text() == "{}"


def test_two_ranks_get_a_timeline_each_and_a_ranks_chart(workdir):
    trace = (
        ROOT / "tests" / "data" / "public" / "nsys" / "nsysai_mfu_2gpu_before_nsys2026.2.sqlite.gz"
    )
    data = pipeline.report(trace, whole_trace=True)
    assert sorted(tl.rank for tl in data.timelines) == [0, 1]
    page = html.render(data)
    assert 'data-chart="ranks"' in page and 'data-table="collectives"' in page
    assert "rank 0 stream" in page and "rank 1 host" in page


def paragraphs(page: browser.Page, key: str) -> list[str]:
    """The texts of the page's paragraphs with this data-key (entities decoded)."""
    return [
        htmllib.unescape(t)
        for t in re.findall(rf'<p class="[^"]*" data-key="{key}">(.*?)</p>', page.dom)
    ]


# -- the verdict: the model's, the group it is about, its warnings (issue 21, 1) ------------------


def test_the_verdict_is_the_models_text_word_for_word(dense, dense_page):
    assert paragraphs(dense_page, "verdict") == [dense[2].ranking.verdict.text()]


def test_the_verdict_says_which_group_it_is_about_and_why(hf):
    data, page = hf
    assert paragraphs(page, "verdict-about") == [f"about: {data.ranking.verdict.group}"]
    assert "modelling the most frequent, 5" in data.ranking.verdict.group


def test_the_verdicts_warnings_are_shown_each_on_its_own(hf):
    data, page = hf
    shown = paragraphs(page, "verdict-warning")
    assert shown == data.ranking.verdict.warnings
    assert shown[0].startswith("Turn speculation off today. Today: speculating")
    assert "against plain decoding's 62.3 tok/s" in shown[0]
    assert "torch_compile is not ranked first: 9 host syncs per draft step" in shown[1]


def test_without_a_ranking_the_verdict_is_breakdowns_word_for_word(breakdown_only, workdir):
    data, page = breakdown_only
    assert data.ranking is None
    (verdict,) = paragraphs(page, "verdict")
    assert verdict == json.loads((workdir / "graph.json").read_text())["verdict"]
    assert verdict.endswith("Give an accept length (--accept-len or a capture manifest) for the"
                            " plan of fixes.")  # fmt: skip
    assert paragraphs(page, "verdict-about") == [f"about: {data.group_why}"]


def test_without_a_ranking_the_dominant_cost_is_a_share_of_the_steps_cost(breakdown_only):
    data, page = breakdown_only
    group = next(
        g for g in data.summary["groups"] if (g["name"], g["variant"]) == tuple(data.group)
    )
    share = group["phases"]["elementwise"]["mean"] / group["cost_ns"]["mean"]
    assert group["cost_ns"]["mean"] < 0.9 * group["wall_ns"]["mean"]  # graph steps overlap
    (verdict,) = paragraphs(page, "verdict")
    assert f"; {share:.0%} of its cost elementwise:" in verdict


def test_the_plan_table_is_the_typed_plan_with_plain_decoding_beside_each_step(dense, dense_page):
    r = dense[2].ranking
    assert cells(dense_page, "plan", "name") == [s.candidate.name for s in r.plan]
    assert cells(dense_page, "plan", "tokens_per_s") == [f"{s.cumulative_tps:.1f}" for s in r.plan]
    assert cells(dense_page, "plan", "plain") == [f"{t:.1f}" for t in r.plain.along_plan]


def test_every_candidate_is_listed_with_what_blocks_it(hf):
    data, page = hf
    r = data.ranking
    assert cells(page, "candidates", "name") == [c.name for c in r.candidates]
    notes = dict(zip(cells(page, "candidates", "name"), cells(page, "candidates", "notes")))
    assert notes["cuda_graph_draft"].startswith("blocked: 9 host syncs per draft step")


# -- kernel names as nsys shortens them, tables that stay in the page (2, 3) ---------------------


def test_kernel_names_are_shortened_with_the_full_name_on_hover(dense, dense_page):
    full = [k["name"] for k in dense[2].kernels["kernels"]]
    shown = dense_page.tables()["kernels"].column("name")
    assert [c.title for c in shown] == full
    assert [c.text for c in shown] == [short_kernel_name(n) for n in full]
    elementwise = [c.text for c in shown if c.text.startswith("elementwise_kernel<…")]
    assert "elementwise_kernel<…MulFunctor…>" in elementwise  # the functor tells them apart
    assert len(set(elementwise)) == len(elementwise)


def test_long_kernel_names_leave_the_phase_and_share_columns_in_view(odd_names):
    table = odd_names[1].tables()["kernels"]
    assert {short_kernel_name(LONG_TEMPLATE), LONG_WORD} <= {c.text for c in table.column("name")}
    headers = {c.text: c for c in table.headers}
    assert headers["phase"].right <= browser.WIDTH and headers["%"].right <= browser.WIDTH
    assert headers["med us"].right <= browser.WIDTH


def test_the_top_kernels_table_is_the_kernels_commands_columns_and_rows(dense_page):
    """The page's table and ``kernels``' console table: the same columns (calls per step, one
    call's median, then its min-max; no mean), the same rows, as many of them by default."""
    ran = verifyprof("kernels", str(EAGER), "--manifest", str(MANIFEST), env={"COLUMNS": "220"})
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:2] == ["#", "phase"])
    console_headers = re.split(r"\s{2,}", lines[at].strip())
    console_rows = [
        line.strip().split(None, 8) for line in lines[at + 2 :] if line[:3].strip().isdigit()
    ]
    table = dense_page.tables()["kernels"]
    assert [c.text for c in table.headers] == console_headers
    assert "med us" in console_headers and "mean us" not in console_headers
    assert [[c.text for c in row] for row in table.rows] == console_rows


def test_every_table_stays_inside_the_window(dense_page, hf, odd_names):
    for page in (dense_page, hf[1], odd_names[1]):
        for key, table in page.tables().items():
            right = max(c.right for row in [table.headers] + table.rows for c in row)
            assert right <= browser.WIDTH, f"table {key} ends at {right} px"


def test_prose_is_left_aligned_and_numbers_right_aligned(dense_page):
    tables = dense_page.tables()
    assert {c.align for c in tables["plan"].column("assumptions")} == {"left"}
    assert {c.align for c in tables["candidates"].column("notes")} == {"left"}
    assert {c.align for c in tables["unaddressed"].column("reason")} == {"left"}
    for table, key in (("plan", "tokens_per_s"), ("kernels", "share"), ("groups", "cost-mean-ms")):
        assert {c.align for c in tables[table].column(key)} == {"right"}, (table, key)


# -- colours: one table for every chart (4) ------------------------------------------------------


def test_every_chart_draws_with_the_colour_table(dense_page):
    palette = {c.lower() for c in COLOURS.values()}
    for name, plot in dense_page.plots().items():
        for trace in plot["traces"]:
            colours = trace.get("color")
            if trace["type"] == "heatmap" or colours is None:
                continue
            for c in colours if isinstance(colours, list) else [colours]:
                assert c.lower() in palette, f"chart {name}, trace {trace['name']}: {c}"


# -- the heatmap around today's point, with the plain-decoding break-even (5) --------------------


def test_the_heatmap_puts_today_in_the_middle_of_both_axes(dense, dense_page):
    now = dense[2].ranking.current
    plot = dense_page.plots()["heatmap"]
    assert np.mean(plot["x"]) == pytest.approx(now.verify_ms)
    assert np.mean(plot["y"]) == pytest.approx(now.accept_len)


def test_the_heatmap_marks_today(dense, dense_page):
    now = dense[2].ranking.current
    (today,) = [t for t in dense_page.plots()["heatmap"]["traces"] if t["name"] == "today"]
    assert today["x"] == [pytest.approx(now.verify_ms)] and today["y"] == [
        pytest.approx(now.accept_len)
    ]


def test_the_heatmap_draws_accept_length_equal_to_cycle_over_the_decode_step(dense, dense_page):
    r = dense[2].ranking
    (line,) = [
        t for t in dense_page.plots()["heatmap"]["traces"] if t["name"].startswith("break-even")
    ]
    expected = [r.current.with_(verify_ms=x).cycle_ms / r.plain.decode_ms for x in line["x"]]
    assert line["y"] == pytest.approx(expected)
    at_today = np.interp(r.current.verify_ms, line["x"], line["y"])
    assert at_today == pytest.approx(r.plain.break_even_accept_len)


# -- a cycle per configuration; tokens/s by draft count (6) --------------------------------------


def test_the_cycle_chart_has_a_bar_per_configuration(dense, dense_page):
    r = dense[2].ranking
    bars = {t["name"]: t for t in dense_page.plots()["cycles"]["traces"]}
    k = r.curve.current_k
    assert bars["draft"]["y"] == (
        [f"today (k = {k})"]
        + [f"plan {i}: {'+ ' * (i > 1)}{s.candidate.name}" for i, s in enumerate(r.plan, 1)]
        + ["plain decoding (k = 0)"]
        + [
            f"k = {p['num_draft']}" + (" (today's k)" if p["num_draft"] == k else "")
            for p in r.curve.points[1:]
        ]
    )


def test_each_cycle_bar_stacks_draft_verify_and_overhead_to_the_cycle(dense, dense_page):
    r = dense[2].ranking
    bars = {t["name"]: t for t in dense_page.plots()["cycles"]["traces"]}
    cycles = [r.current] + [s.candidate.cycle for s in r.plan] + [r.plain.cycle]
    n = len(cycles)
    assert bars["draft"]["x"][:n] == pytest.approx([c.draft_ms for c in cycles])
    assert bars["verify"]["base"][:n] == pytest.approx([c.draft_ms for c in cycles])
    assert bars["verify"]["x"][:n] == pytest.approx([c.verify_ms for c in cycles])
    ends = np.add(bars["overhead"]["base"], bars["overhead"]["x"])
    assert list(ends[:n]) == pytest.approx([c.cycle_ms for c in cycles])
    assert list(ends[n:]) == pytest.approx([p["cycle_ms"] for p in r.curve.points[1:]])


def test_the_draft_chart_draws_tokens_per_s_by_k_with_plain_decoding_and_the_best_k(
    dense, dense_page
):
    r = dense[2].ranking
    traces = dense_page.plots()["drafts"]["traces"]
    curve, plain, best = traces[0], traces[1], traces[2]
    assert curve["x"] == [p["num_draft"] for p in r.curve.points]
    assert curve["y"] == pytest.approx([p["tokens_per_s"] for p in r.curve.points])
    assert plain["y"] == pytest.approx([r.plain.tokens_per_s] * 2)
    assert plain["name"].startswith("plain decoding")
    assert best["name"].startswith(f"best k = {r.curve.best['num_draft']}")
    assert best["x"] == [r.curve.best["num_draft"]]


def test_the_draft_chart_marks_which_verify_times_were_traced_and_which_modelled(dense, dense_page):
    points = dense[2].ranking.curve.points
    drawn = {
        t["name"]: t
        for t in dense_page.plots()["drafts"]["traces"]
        if t["name"].startswith("verify ")
    }
    sources = {p["verify_source"] for p in points}
    assert set(drawn) == {f"verify {s}" for s in sources}
    for source in sources:
        assert drawn[f"verify {source}"]["x"] == [
            p["num_draft"] for p in points if p["verify_source"] == source
        ]
    assert {"today", "fitted"} <= sources  # the eager capture: its own width, the model's others


def test_the_draft_table_gives_each_points_verify_time_and_its_source(dense, dense_page):
    points = dense[2].ranking.curve.points
    table = dense_page.tables()["drafts"]
    assert [c.text for c in table.column("verify_source")] == [p["verify_source"] for p in points]
    assert [c.text for c in table.column("verify_ms")] == [f"{p['verify_ms']:.3f}" for p in points]
    assert [c.text for c in table.column("tokens_per_s")] == [
        f"{p['tokens_per_s']:.1f}" for p in points
    ]


def test_the_load_chart_draws_tok_per_gpu_by_batch_one_line_per_k_plain_dashed(dense, dense_page):
    load = dense[2].ranking.load
    curve = load.curves[0]
    traces = dense_page.plots()["load-0"]["traces"]
    batches = [row.batch for row in curve.rows]
    lines = traces[: len(curve.rows[0].points)]
    for i, trace in enumerate(lines):
        k = curve.rows[0].points[i]["num_draft"]
        assert trace["x"] == [str(b) for b in batches]  # a category axis: one slot per batch
        assert trace["y"] == pytest.approx(
            [row.points[i]["tokens_per_s_per_gpu"] for row in curve.rows]
        )
        assert trace["name"] == ("plain decoding (k = 0)" if k == 0 else f"k = {k}")
    best = traces[len(lines)]
    assert best["y"] == pytest.approx([row.best["tokens_per_s_per_gpu"] for row in curve.rows])
    assert "Speculate or not at every load" in dense_page.dom


# -- the verdict's step group first (7) ---------------------------------------------------------


def test_the_steps_table_lists_the_verdicts_group_first(hf):
    data, page = hf
    groups = page.tables()["groups"]
    first = (groups.rows[0][0].text, groups.rows[0][1].text)
    assert first == data.group and data.group != (
        data.summary["groups"][0]["name"],
        data.summary["groups"][0]["variant"],
    )


def test_the_first_step_chart_is_the_verdicts_group(hf):
    data, page = hf
    chart = re.search(r'data-chart="steps-0".*?class="gtitle"[^>]*>(.*?)</text>', page.dom, re.S)
    assert chart and chart.group(1) == label(data.group)


def test_the_timeline_and_top_kernels_name_the_verdicts_group(hf):
    data, page = hf
    assert f'<h2 id="timeline">Timeline of the median {label(data.group)} step</h2>' in page.dom
    assert f'<h2 id="kernels">Top kernels of {label(data.group)}</h2>' in page.dom


def test_every_group_shows_its_cost_per_step_not_its_window(workdir):
    data = pipeline.report(COMPILE)  # graph verify steps' windows hold other steps' GPU work
    page = workdir / "compile.html"
    html.write_report(data, page)
    groups = browser.Page(page.read_text(), "").tables()["groups"]
    shown = {(r[0].text, r[1].text): r for r in groups.rows}
    for g in data.summary["groups"]:
        row = {c.key: c.text for c in shown[(g["name"], g["variant"])]}
        assert row["cost-mean-ms"] == f"{g['cost_ns']['mean'] / 1e6:.3f}"
        assert row["modes"] == ", ".join(f"{m} x{n}" for m, n in g["modes"].items())
    story = next(g for g in data.summary["groups"] if (g["name"], g["variant"]) == data.group)
    assert story["cost_ns"]["mean"] < 0.9 * story["wall_ns"]["mean"]


# -- the report leads with the decision; no label covers another or a bar (issue 27, 6) --------


def overlap(a: list[int], b: list[int], tolerance: int = 1) -> bool:
    """Two boxes [left, top, right, bottom] share more than ``tolerance`` px each way."""
    return (
        min(a[2], b[2]) - max(a[0], b[0]) > tolerance
        and min(a[3], b[3]) - max(a[1], b[1]) > tolerance
    )


def test_no_label_covers_another_label_or_a_bar(dense_page, hf):
    """Every chart of both pages, as Chromium laid it out: each text's box (titles, ticks,
    legend entries, bar labels) clear of every other text and of every bar."""
    pages = {"dense": dense_page, "hf": hf[1]}
    checked = 0
    for page_name, page in pages.items():
        marks = page.marks()
        assert {"plan", "cycles", "timeline"} <= set(marks), page_name
        for chart, m in marks.items():
            texts = m["texts"]
            checked += len(texts)
            for i, a in enumerate(texts):
                for b in texts[i + 1 :]:
                    assert not overlap(a["box"], b["box"]), (page_name, chart, a, b)
                for bar in m["bars"]:
                    assert not overlap(a["box"], bar), (page_name, chart, a, bar)
    assert checked > 100


def test_plain_decoding_with_the_same_fixes_sits_on_each_steps_bar(dense, dense_page):
    """One diamond per plan step, inside the horizontal extent of that step's bar; plain
    decoding today is named in the legend, not written on the plot."""
    ranking = dense[2].ranking
    marks = dense_page.marks()["plan"]
    bars = sorted(marks["bars"])  # left to right: today, each step, the plan's total
    diamonds = sorted(marks["markers"])
    assert len(bars) == len(ranking.plan) + 2 and len(diamonds) == len(ranking.plain.along_plan)
    for bar, diamond in zip(bars[1:], diamonds, strict=False):
        centre = (diamond[0] + diamond[2]) / 2
        assert bar[0] < centre < bar[2], (bar, diamond)
    legend = [t["text"] for t in marks["texts"] if "legend" in t["cls"]]
    assert f"plain decoding today {ranking.plain.tokens_per_s:.1f} tok/s" in legend
    assert not any(
        "plain decoding" in t["text"] for t in marks["texts"] if "legend" not in t["cls"]
    )


def test_the_comparison_comes_first_then_the_decision(dense, dense_page):
    dom = dense_page.dom
    at = {key: dom.index(f'id="{key}"') for key in ("compare", "verdict", "cycles", "kernels")}
    assert at["compare"] < at["verdict"] < at["cycles"] < at["kernels"]
    decision = dom.index('data-key="decision"')
    assert at["verdict"] < decision < dom.index('data-key="verdict"')


def test_the_decision_is_the_verdicts_sentences_first_fix_today_after_the_plan_best_k(
    dense, dense_page
):
    verdict = dense[2].ranking.verdict
    items = dict(re.findall(r'<li data-key="([a-z-]+)"><b>[^<]*</b> (.*?)</li>', dense_page.dom))
    assert list(items)[:1] == ["first"] and {"today", "after-plan", "best-k"} <= set(items)
    assert htmllib.unescape(items["first"]) == verdict.plan
    assert htmllib.unescape(items["best-k"]) == verdict.drafts
    today, after = (htmllib.unescape(items[k]) for k in ("today", "after-plan"))
    assert today.startswith("speculating ") and "plain decoding" in today
    assert f"Today: {today}" in verdict.decision and f"After the plan: {after}" in verdict.decision
    ranking = dense[2].ranking
    assert paragraphs(dense_page, "verdict-steps") == [
        f"numbers: the mean of {ranking.profile.verify.steps} steps, as traced"
    ]  # one device, no dilation measured: the steps table's group, as traced


def test_the_top_kernels_scope_is_words_not_a_regex(dense, dense_page):
    (scope,) = paragraphs(dense_page, "kernels-scope")
    assert "(?" not in scope and "\\s" not in scope and "^" not in scope
    assert scope.startswith(f"kernels launched inside the 40 {label(dense[2].group)} steps")
