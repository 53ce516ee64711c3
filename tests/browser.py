"""Headless Chromium (Debian's ``chromium`` package) for the HTML report tests: the DOM after the
page's scripts ran, a screenshot, and the console messages, with the network off.

``load(..., probe=True)`` opens a copy of the page with one more script, run after the page's
own: it writes onto every table cell where the browser put it and how it aligns its text
(``data-probe="left right text-align"``), and onto every chart what plotly drew (``data-plot``:
axis ranges and each trace's name, type, x, y and base). ``Page.tables()`` and ``Page.plots()``
read them back.
"""

from __future__ import annotations

import html as htmllib
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

WIDTH = 1400
CONSOLE = re.compile(
    r":CONSOLE[:(]\d+"
)  # chromium's log line of a console message (its level is not logged)


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: .ci/run installs Debian's chromium package")
        pytest.skip("chromium not installed (apt-get install chromium)")
    return found


PROBE = """<script>
window.addEventListener('load', function () { setTimeout(function () {
  function arr(v) { return v == null || typeof v === 'string' ? v : Array.from(v); }
  document.querySelectorAll('table[data-table] th, table[data-table] td').forEach(function (e) {
    var r = e.getBoundingClientRect();
    e.setAttribute('data-probe',
      [Math.round(r.left), Math.round(r.right), getComputedStyle(e).textAlign].join(' '));
  });
  document.querySelectorAll('.js-plotly-plot').forEach(function (gd) {
    var fl = gd._fullLayout;
    gd.setAttribute('data-plot', JSON.stringify({
      x: fl.xaxis && fl.xaxis.range, y: fl.yaxis && fl.yaxis.range,
      traces: gd._fullData.map(function (t) {
        return {name: t.name, type: t.type, mode: t.mode, x: arr(t.x), y: arr(t.y),
                base: arr(t.base), color: t.marker && t.marker.color};
      })}));
  });
  document.querySelectorAll('.js-plotly-plot').forEach(function (gd) {  // labels and marks
    function box(e) { var r = e.getBoundingClientRect();
      return [r.left, r.top, r.right, r.bottom].map(Math.round); }
    var texts = [], bars = [], markers = [];
    gd.querySelectorAll('svg text').forEach(function (e) {
      var r = e.getBoundingClientRect(), s = getComputedStyle(e);
      if (!e.textContent.trim() || r.width < 1 || r.height < 1 || s.visibility === 'hidden'
          || s.display === 'none' || e.closest('.hoverlayer')) return;
      texts.push({text: e.textContent, box: box(e), cls: e.getAttribute('class') || ''});
    });
    gd.querySelectorAll('.barlayer .point path, .waterfalllayer .point path').forEach(
      function (e) { if (e.getBoundingClientRect().width >= 1) bars.push(box(e)); });
    gd.querySelectorAll('.scatterlayer .points path.point').forEach(
      function (e) { markers.push(box(e)); });
    gd.setAttribute('data-marks', JSON.stringify({texts: texts, bars: bars, markers: markers}));
  });
  document.body.setAttribute('data-probed', 'yes');
}, 0); });
</script>"""


@dataclass
class Cell:
    text: str
    key: str = ""
    title: str | None = None
    kind: str = ""  # the cell's class
    left: int = 0
    right: int = 0
    align: str = ""


@dataclass
class Table:
    headers: list[Cell] = field(default_factory=list)
    rows: list[list[Cell]] = field(default_factory=list)

    def column(self, key: str) -> list[Cell]:
        return [c for row in self.rows for c in row if c.key == key]


class _Tables(HTMLParser):
    """Every ``table[data-table]`` of a dumped DOM, cell by cell."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, Table] = {}
        self.table: Table | None = None
        self.cell: Cell | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "table" and "data-table" in a:
            self.table = self.tables.setdefault(a["data-table"], Table())
        elif tag == "tr" and self.table is not None:
            self.table.rows.append([])
        elif tag in ("td", "th") and self.table is not None:
            left, right, align = (a.get("data-probe") or "0 0 -").split(" ")
            self.cell = Cell(
                "",
                a.get("data-key", ""),
                a.get("title"),
                a.get("class", ""),
                int(left),
                int(right),
                align,
            )
            (self.table.headers if tag == "th" else self.table.rows[-1]).append(self.cell)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th"):
            self.cell = None
        elif tag == "table":
            if self.table is not None:
                self.table.rows = [r for r in self.table.rows if r]
            self.table = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.text += data


@dataclass
class Page:
    dom: str
    log: str

    def tables(self) -> dict[str, Table]:
        parser = _Tables()
        parser.feed(self.dom)
        return parser.tables

    def marks(self) -> dict[str, dict[str, Any]]:
        """Where each chart's labels (``texts``: text, box, class), bars and markers were drawn,
        boxes as [left, top, right, bottom] px (a page loaded with ``probe=True``)."""
        found = re.findall(r'<div id="chart-([^"]+)"[^>]*?data-marks="([^"]*)"', self.dom)
        assert found, "no data-marks: load the page with probe=True"
        return {name: json.loads(htmllib.unescape(marks)) for name, marks in found}

    def plots(self) -> dict[str, dict[str, Any]]:
        """What plotly drew in each chart (a page loaded with ``probe=True``), by chart name."""
        found = re.findall(r'<div id="chart-([^"]+)"[^>]*?data-plot="([^"]*)"', self.dom)
        assert found, "no data-plot: load the page with probe=True"
        return {name: json.loads(htmllib.unescape(plot)) for name, plot in found}

    @property
    def console_messages(self) -> list[str]:
        """Every console message: uncaught errors, console.error/warn/log (the report logs
        nothing)."""
        return [line for line in self.log.splitlines() if CONSOLE.search(line)]


def _run(args: list[str], tmp: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """One headless Chromium run; once more, with a fresh profile, where it hangs: a tall
    screenshot on 2 busy cores once ran past 120 s in a full suite (fresh clone, 2026-12-06) and
    took 9 s alone. A second hang fails the test."""
    try:
        return _chromium(args, tmp / "profile", timeout)
    except subprocess.TimeoutExpired:
        return _chromium(args, tmp / "profile-again", timeout)


def _chromium(args: list[str], profile: Path, timeout: float) -> subprocess.CompletedProcess:
    base = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--enable-logging=stderr",
        "--v=0",
        f"--user-data-dir={profile}",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # no name resolves: offline
        "--virtual-time-budget=15000",
        "--run-all-compositor-stages-before-draw",
    ]
    return subprocess.run(base + args, capture_output=True, text=True, timeout=timeout, check=False)


def load(html: Path, tmp: Path, height: int = 2000, probe: bool = False) -> Page:
    """The DOM after load (scripts ran, charts drawn) and chromium's log (console messages
    included); with ``probe``, of a copy of the page with ``PROBE`` added after its scripts."""
    if probe:
        probed = tmp / f"{html.stem}.probed.html"
        head, end, tail = html.read_text().rpartition("</body>")
        probed.write_text(head + PROBE + end + tail)
        html = probed
    proc = _run([f"--window-size={WIDTH},{height}", "--dump-dom", html.resolve().as_uri()], tmp)
    assert proc.returncode == 0, proc.stderr[-2000:]
    page = Page(dom=proc.stdout, log=proc.stderr)
    assert not probe or 'data-probed="yes"' in page.dom, "the probe did not run"
    return page


def screenshot(html: Path, tmp: Path, height: int) -> Path:
    out = tmp / f"{html.stem}.png"
    proc = _run(
        [f"--window-size={WIDTH},{height}", f"--screenshot={out}", html.resolve().as_uri()], tmp
    )
    assert proc.returncode == 0 and out.is_file(), proc.stderr[-2000:]
    return out
