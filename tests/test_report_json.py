"""``report --json``: the page's numbers on stdout, in the shapes the other commands print them
(test_one_story checks they are those commands' numbers on every trace); the page and its JSON
say the same decision; -o is optional with --json, and asking for neither, or for both on
stdout, is one line, exit 2. The real CLI on a bundled capture."""

from __future__ import annotations

import html as htmllib
import json
import re
from pathlib import Path

import pytest
from cli_helpers import verifyprof

ROOT = Path(__file__).resolve().parents[1]
EAGER = ROOT / "traces" / "workload-dense-eager" / "trace.sqlite.gz"
MANIFEST = EAGER.parent / "manifest.json"


@pytest.fixture(scope="module")
def page_and_json(tmp_path_factory) -> tuple[str, dict, str]:
    out = tmp_path_factory.mktemp("report") / "dense.html"
    done = verifyprof("report", str(EAGER), "--manifest", str(MANIFEST), "-o", str(out), "--json")
    assert done.returncode == 0, done.stderr
    return out.read_text(), json.loads(done.stdout), done.stderr


def decision_items(page: str) -> list[tuple[str, str]]:
    """(data-key, text) of each item of the page's decision list, tags stripped."""
    listed = re.search(r'<ul class="decision" data-key="decision">(.*?)</ul>', page, re.S)
    assert listed is not None
    return [
        (key, htmllib.unescape(re.sub(r"<[^>]+>", "", body)))
        for key, body in re.findall(r'<li data-key="([^"]+)">(.*?)</li>', listed.group(1))
    ]


def test_with_o_and_json_the_page_is_written_and_its_numbers_printed(page_and_json):
    page, doc, stderr = page_and_json
    assert page.startswith("<!DOCTYPE html>")
    assert doc["source"] == str(EAGER) and doc["whatif"]["current"]["tokens_per_s"] > 0
    assert re.fullmatch(r"wrote \S+dense\.html \([0-9.]+ MB\)\n", stderr)  # stdout is the JSON


def test_the_pages_decision_is_the_jsons_item_for_item(page_and_json):
    page, doc, _ = page_and_json
    assert decision_items(page) == [
        (d["key"], f"{d['label']}: {d['text']}") for d in doc["decision"]
    ]
    assert [d["key"] for d in doc["decision"]] == [
        "first",
        "answer",
        "today",
        "after-plan",
        "best-k",
    ]


def test_the_page_names_the_group_and_verdict_the_json_gives(page_and_json):
    page, doc, _ = page_and_json
    verdict = re.search(r'<p class="verdict" data-key="verdict">(.*?)</p>', page, re.S)
    assert verdict is not None and htmllib.unescape(verdict.group(1)) == doc["verdict"]
    assert doc["group"]["mode"] == doc["whatif"]["current"]["mode"] == "eager"


def test_json_alone_writes_no_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    done = verifyprof("report", str(EAGER), "--accept-len", "2.0", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["kernels"]["kernels"] and doc["step_groups"][0]["name"] == doc["group"]["name"]
    assert list(tmp_path.iterdir()) == [] and done.stderr == ""


def test_neither_o_nor_json_is_one_line_exit_2():
    done = verifyprof("report", str(EAGER))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "verifyprof: error: report: give -o FILE for the page, or --json for its numbers"
    ]


def test_the_page_and_the_json_both_on_stdout_is_one_line_exit_2():
    done = verifyprof("report", str(EAGER), "-o", "-", "--json")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "verifyprof: error: report: -o - and --json both print on stdout: give -o a file"
    ]
