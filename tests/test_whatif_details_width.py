"""``whatif --details`` at 80 columns (issue 44): every table keeps its key column and its
numbers whole (text columns wrap or abbreviate instead), and no line repeats.

Each bundled capture's ``--json`` is rendered as the CLI renders it (``print_ranking``) at 80
columns, where the tables are checked, and at 1000, where nothing wraps, so that a repeated line
is a repeated sentence or row, not two sentences that happen to wrap to the same tail. Lines
that are exempt: rules, table headers (the two lines above a rule: each table has its own),
and server commands printed whole to be copied (each load range's settings stay complete)."""

from __future__ import annotations

import json
import os
import re
from collections import Counter

import pytest
from cli_helpers import verifyprof
from conftest import OWN_TRACES
from rich.console import Console

from verifyprof.report import whatif_console as show

TRACES = sorted(
    p.name
    for p in OWN_TRACES.iterdir()
    if (p / "manifest.json").is_file() and (any(p.glob("*.sqlite*")) or any(p.glob("*.nsys-rep")))
)
COMMANDS = ("--", "no --", "verifyprof ")  # printed whole on their own lines, to be copied


def render(data: dict, width: int) -> list[str]:
    console = Console(width=width, record=True, file=open(os.devnull, "w"))
    show.print_ranking(data, console, details=True)
    return console.export_text().splitlines()


@pytest.fixture(scope="module", params=TRACES)
def shown(request) -> tuple[dict, list[str], list[str]]:
    ran = verifyprof("whatif", str(OWN_TRACES / request.param), "--json")
    assert ran.returncode == 0, ran.stderr
    data = json.loads(ran.stdout)
    return data, render(data, 80), render(data, 1000)


def is_rule(line: str) -> bool:
    return set(line.strip()) <= {"─", " "}


def table_rows(lines: list[str], title: str) -> list[str]:
    """The rows of the table under the line starting with ``title``: after its rule, up to the
    first line that is neither a row nor a row's wrapped words (indented 3 or more)."""
    at = next(i for i, line in enumerate(lines) if line.startswith(title))
    rule = next(i for i in range(at, len(lines)) if is_rule(lines[i]) and lines[i].strip())
    rows = []
    for line in lines[rule + 1 :]:
        if re.match(r"  \S", line) or not (re.search(r"\d", line) or line.startswith(" " * 3)):
            break
        rows.append(line)
    return rows


def test_the_draft_count_table_keeps_k_and_every_number_whole(shown):
    data, narrow, _ = shown
    if not data.get("draft_curve"):
        pytest.skip("no draft-count curve: the draft count is unknown in this capture")
    rows = table_rows(narrow, "Draft count:")
    header = narrow[narrow.index(next(x for x in narrow if x.startswith("Draft count:"))) + 2]
    assert header.split()[0] == "k", header
    for point in data["draft_curve"]["points"]:
        row = next(r for r in rows if r.split()[0] == str(point["num_draft"]))
        cells = row.split()
        assert cells[1] == str(point["width"]) and cells[2] == f"{point['verify_ms']:.3f}"
        assert f"{point['tokens_per_s']:.1f}" in cells
        if point.get("band") is not None:
            band = f"+/-{100 * point['band']:.0f}%"
            at = narrow.index(row)
            assert band in narrow[at].split() + narrow[at + 1].split(), row  # maybe wrapped


def test_every_candidate_name_and_number_is_whole(shown):
    data, narrow, _ = shown
    rows = table_rows(narrow, "Each candidate alone")
    for i, cand in enumerate(data["candidates"], start=1):
        row = next(r for r in rows if r.split()[0] == str(i))
        cells = row.split()
        assert cells[1] == cand["name"], row
        assert f"{cand['tokens_per_s']:.1f}" in cells and f"{100 * cand['gain']:+.1f}%" in cells


def test_no_line_is_wider_than_80_and_no_number_is_cut(shown):
    _, narrow, _ = shown
    prose = [x for x in narrow if not x.strip().startswith(COMMANDS)]
    assert max(len(line) for line in prose) <= 80
    assert [x for x in narrow if re.search(r"\d…|…\d", x)] == []


def test_no_line_repeats(shown):
    _, _, wide = shown
    headers = {i - d for i, x in enumerate(wide) if x.strip() and is_rule(x) for d in (1, 2)}
    said = Counter(
        x.strip()
        for i, x in enumerate(wide)
        if x.strip() and not is_rule(x) and i not in headers
        and not x.strip().startswith(COMMANDS)
    )  # fmt: skip
    assert [x for x, n in said.items() if n > 1] == []


def test_each_block_and_warning_of_a_candidate_is_said_once(shown):
    data, _, wide = shown
    text = "\n".join(" ".join(line.split()) for line in wide)
    said = [x for c in data["candidates"] for x in c.get("blocked_by", []) + c.get("warnings", [])]
    assert [x for x in said if text.count(" ".join(x.split())) != 1] == []  # not once per candidate
