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
from PIL import Image

from verifyprof import pipeline
from verifyprof.contracts import phases
from verifyprof.report import html

ROOT = Path(__file__).resolve().parents[1]
EAGER = ROOT / "traces" / "workload-dense-eager" / "trace.sqlite.gz"
GRAPH = ROOT / "traces" / "workload-dense-graph" / "trace.sqlite.gz"
MANIFEST = EAGER.parent / "manifest.json"
MI300X = (
    ROOT
    / "tests"
    / "data"
    / "public"
    / "kineto"
    / "tracelens_mi300x_sglang_qwen3-8b_decode.json.gz"
)
HOSTILE = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("report")


@pytest.fixture(scope="module")
def dense(workdir) -> tuple[Path, pipeline.Loaded]:
    """The eager trace's report, with its what-if and the graph trace as AFTER."""
    loaded = pipeline.load_input(EAGER)
    data = pipeline.report(EAGER, compare_with=GRAPH, manifest=MANIFEST)
    out = workdir / "dense.html"
    html.write_report(data, out)
    return out, loaded


@pytest.fixture(scope="module")
def dense_page(dense, workdir) -> browser.Page:
    return browser.load(dense[0], workdir)


def cells(dom: str, table: str, key: str) -> list[str]:
    """The texts of one column (data-key) of one table (data-table) in the dumped DOM."""
    body = re.search(rf'<table data-table="{table}">(.*?)</table>', dom, re.S)
    assert body, f"no table {table}"
    return [
        htmllib.unescape(v)
        for v in re.findall(
            rf'<td class="[^"]*" data-key="{key}" data-row="\d+">(.*?)</td>', body.group(1), re.S
        )
    ]


def test_report_has_no_console_messages(dense_page):
    assert dense_page.console_messages == []


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
    assert {"plan", "steps-0", "timeline", "heatmap", "compare"} <= set(names)
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
    document = dense[1].result.to_json()
    groups = document["summary"]["groups"]
    assert cells(dense_page.dom, "groups", "wall-mean-ms") == [
        f"{g['wall_ns']['mean'] / 1e6:.3f}" for g in groups
    ]
    assert cells(dense_page.dom, "groups", "wall-p50-ms") == [
        f"{g['wall_ns']['p50'] / 1e6:.3f}" for g in groups
    ]
    kernels = dense[1].kernel_table.to_json(40)["kernels"]
    assert cells(dense_page.dom, "kernels", "name") == [k["name"] for k in kernels]
    assert cells(dense_page.dom, "kernels", "total-ms") == [
        f"{k['total_ns'] / 1e6:.3f}" for k in kernels
    ]


def test_timeline_idle_matches_the_median_steps_phases(dense, dense_page):
    steps = dense[1].result.steps
    (step,) = cells(dense_page.dom, "timeline", "step")
    row = steps[(steps["step"] == int(step)) & (steps["device"] == 0)].iloc[0]
    idle = sorted((p, row[p]) for p in phases.OTHER + phases.IDLE if row[p])
    assert cells(dense_page.dom, "timeline", "idle") == [
        ", ".join(f"{p} {ns / 1e6:.3f} ms" for p, ns in idle)
    ]


def test_compare_section_shows_the_verdict_and_prediction(dense_page):
    dom = dense_page.dom
    assert re.search(r"faster: verify (wall|cost) 12\.631 -&gt; 2\.202 ms", dom)
    assert cells(dense_page.dom, "prediction", "what")[:1] == ["verify ms"]


@pytest.fixture(scope="module")
def hostile_trace(workdir) -> Path:
    """The MI300X SGLang decode trace with its most frequent kernel renamed to a script tag."""
    data = json.loads(gzip.decompress(MI300X.read_bytes()))
    kernels = [e for e in data["traceEvents"] if e.get("cat") == "kernel"]
    names = [e["name"] for e in kernels]
    target = max(set(names), key=names.count)
    for event in kernels:
        if event["name"] == target:
            event["name"] = HOSTILE
    out = workdir / "hostile_trace.json"
    out.write_text(json.dumps(data))
    return out


def test_a_hostile_kernel_name_is_shown_as_text(hostile_trace, workdir):
    out = workdir / "hostile.html"
    html.write_report(pipeline.report(hostile_trace, step_regex="DECODE"), out)
    page = browser.load(out, workdir)
    assert HOSTILE in cells(page.dom, "kernels", "name")
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


def test_breakdown_json_report_says_what_it_cannot_show(tmp_path, workdir):
    source = tmp_path / "graph.json"
    source.write_text(
        subprocess.run(
            [sys.executable, "-m", "verifyprof.cli", "breakdown", str(GRAPH), "--json"],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
    )
    out = tmp_path / "graph.html"
    html.write_report(pipeline.report(source), out)
    page = browser.load(out, workdir)
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
    trace = ROOT / "tests" / "data" / "public" / "nsys" / "nsysai_mfu_2gpu_before_nsys2026.2.sqlite"
    data = pipeline.report(trace, whole_trace=True)
    assert sorted(tl.rank for tl in data.timelines) == [0, 1]
    page = html.render(data)
    assert 'data-chart="ranks"' in page and 'data-table="collectives"' in page
    assert "rank 0 stream" in page and "rank 1 host" in page
