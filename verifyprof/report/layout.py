"""Width-aware tables: names shorten (ellipsis in the middle or at the end), numbers never.

Rich squeezes every column of a too-wide table, numbers included, down to one character. Here
the numeric and text columns get their full content width (``min_width``), and the name column
gets what is left of the console's width, with each name pre-shortened to fit, so rich never
has to cut a number.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from rich import box
from rich import console as rich_console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from verifyprof.contracts.errors import OutputClosed
from verifyprof.contracts.plumbing.outputs import silence_stdout
from verifyprof.contracts.plumbing.text import safe_text

ELLIPSIS = "…"
MIN_NAME = 12  # a name column narrower than this says nothing: let the table grow past the width


class Console(rich_console.Console):
    """Rich's console, except that a closed pipe (``| head``) stops the command quietly with the
    same exit code as JSON output (rich itself exits 1)."""

    def on_broken_pipe(self) -> None:
        silence_stdout()
        raise OutputClosed("standard output closed")

    def render_str(self, text: str, **kwargs):  # type: ignore[no-untyped-def]
        """Every printed string and table cell passes here: names are data
        (contracts.plumbing.text)."""
        return super().render_str(safe_text(text, keep="\n\t"), **kwargs)


@dataclass(frozen=True)
class Col:
    header: str
    # num: right-aligned, never cut; name: a kernel name, shortened to fit (:func:`fit`);
    # label: a step name and its [attributes], the attributes cut at their end (:func:`fit_label`)
    # wrap: words (a basis, a mark, a candidate and its "(blocked)"), wrapped between words into
    # what is left, never cut: a row may take two lines
    kind: Literal["num", "text", "name", "label", "wrap"] = "num"

    @property
    def shortened(self) -> bool:
        return self.kind in ("name", "label", "wrap")


def fit(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters. The function's name matters most, then its
    template arguments (cut at the end), then its namespaces (dropped); a name too long by
    itself (``Cijk_..._MT256x32x64_...``, ``bmm_..._sm100f``) is cut in the middle, keeping both
    ends.
    """
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    base, angle, args = text.partition("<")
    if angle and len(base) + 3 <= width:
        return text[: width - 2] + ELLIPSIS + ">"
    if "::" in base:
        return fit(base.rsplit("::", 1)[1] + angle + args, width)
    if angle:
        return fit(base, width)  # no room for any argument: the name alone
    head = (width - 1) * 2 // 3
    tail = width - 1 - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def fit_label(text: str, width: int) -> str:
    """A step label ``name [k=v ...]`` in ``width``: the name whole, then as much of the
    attributes as fits, in their order (the one that tells groups apart, tokens=, comes first;
    a cut in the middle hid it: ``verify [tokens…weep=1]``)."""
    base, bracket, _ = text.partition(" [")
    if len(text) <= width or not bracket or not text.endswith("]") or len(base) + 4 > width:
        return fit(text, width)
    return text[: width - 2] + ELLIPSIS + "]"


def _share(room: int, wants: dict[int, int]) -> dict[int, int]:
    """Split ``room`` between name columns: narrow ones get all they need, wide ones the rest."""
    budget: dict[int, int] = {}
    left = room
    for n, i in enumerate(sorted(wants, key=wants.__getitem__)):
        budget[i] = max(min(wants[i], left // (len(wants) - n)), min(MIN_NAME, wants[i]))
        left -= budget[i]
    return budget


def fits(console: Console, columns: list[Col], rows: list[list[str]]) -> bool:
    """Whether the table's columns other than names fit the console with a usable name column."""
    widths = [
        max([len(line) for line in c.header.split("\n")] + [len(r[i]) for r in rows])
        for i, c in enumerate(columns)
    ]
    names = sum(1 for c in columns if c.shortened)
    fixed = sum(w for w, c in zip(widths, columns) if not c.shortened)
    return fixed + 2 * (len(columns) - 1) + MIN_NAME * names <= console.width


def fitted_table(
    console: Console,
    columns: list[Col],
    rows: list[list[str]],
    title: str | None = None,
    styles: list[str | None] | None = None,
) -> Table:
    """A table of ``rows`` (plain strings) that fits ``console.width``: numbers at full width,
    names shortened into the rest. Cells are escaped here, so rows hold no rich markup (and
    control characters show as escapes: names are data)."""
    rows = [[safe_text(cell) for cell in row] for row in rows]
    widths = [
        max([len(line) for line in c.header.split("\n")] + [len(r[i]) for r in rows])
        for i, c in enumerate(columns)
    ]
    names = [i for i, c in enumerate(columns) if c.shortened]
    fixed = sum(w for i, w in enumerate(widths) if i not in names)
    overhead = 2 * (
        len(columns) - 1
    )  # box.SIMPLE_HEAD without edges, right padding 1: 2 between columns
    room = max(console.width - fixed - overhead, MIN_NAME * len(names)) if names else 0
    budget = _share(room, {i: widths[i] for i in names})
    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1, 0, 0),
    )
    words = {
        i: max([len(w) for r in rows for w in r[i].split()] + [len(columns[i].header) and 1])
        for i in names
        if columns[i].kind == "wrap"
    }  # a wrapped column is never narrower than its longest word
    budget |= {i: max(budget[i], w) for i, w in words.items()}
    for i, col in enumerate(columns):
        if col.kind == "wrap":
            table.add_column(col.header, overflow="fold", min_width=words[i], max_width=budget[i])
        elif col.shortened:
            table.add_column(col.header, no_wrap=True, overflow="ellipsis", max_width=budget[i])
        else:
            table.add_column(
                col.header,
                justify="right" if col.kind == "num" else "left",
                no_wrap=True,
                min_width=widths[i],
            )
    cut = [fit_label if c.kind == "label" else fit for c in columns]
    shown = {i: distinct([r[i] for r in rows], budget[i], cut[i]) for i in budget if i not in words}
    for n, row in enumerate(rows):
        cells = [escape(shown[i][n] if i in shown else cell) for i, cell in enumerate(row)]
        table.add_row(*cells, style=styles[n] if styles else None)
    return table


def distinct(names: list[str], width: int, cut=fit) -> list[str]:
    """``names`` shortened to ``width`` by ``cut``; where two different names would print
    alike, each is cut in the middle instead, keeping its start and the part that differs."""
    out = [cut(name, width) for name in names]
    seen: dict[str, set[str]] = {}
    for name, short in zip(names, out):
        seen.setdefault(short, set()).add(name)
    for short, group in seen.items():
        if len(group) < 2 or width <= 4:
            continue
        tails = {name: _tail(name, width) for name in group}  # the start, then the end
        if len(set(tails.values())) < len(group):  # the ends alike too: around what differs
            tails = {
                name: _around(name, width, min(_first_difference(name, o) for o in group - {name}))
                for name in group
            }
        out = [tails.get(name, s) if s == short else s for name, s in zip(names, out)]
    return out


def _tail(text: str, width: int) -> str:
    """``text`` in ``width``: its start (a step label's name and bracket whole), an ellipsis,
    and its end."""
    if len(text) <= width:
        return text
    base, bracket, _ = text.partition(" [")
    head = len(base) + 2 if bracket and len(base) + 2 <= (width - 1) // 2 else (width - 1) // 3
    return text[:head] + ELLIPSIS + text[len(text) - (width - 1 - head) :]


def _first_difference(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def _around(text: str, width: int, at: int) -> str:
    """``text`` in ``width``: its start, an ellipsis, then the characters from just before
    ``at`` (the first that differs), with an ellipsis at the end where they run over."""
    if len(text) <= width:
        return text
    head = min(at, (width - 1) // 3)
    room = width - 1 - head
    start = max(head, min(at - 2, len(text) - room))
    body = text[start : start + room]
    if start + room < len(text):
        body = body[:-1] + ELLIPSIS
    return text[:head] + ELLIPSIS + body


def hanging(
    console: Console, lines: list[str], bullet: str, indent: int, style: str | None = None
) -> None:
    """Bulleted lines whose wrapped continuation stays indented under the text, at any width;
    each one line (a newline in a name in it shown as ``\\x0a``, not breaking the list)."""
    grid = Table.grid(padding=(0, 1, 0, 0))
    grid.add_column(width=indent, justify="right", no_wrap=True)
    grid.add_column(overflow="fold")
    for line in lines:
        grid.add_row(bullet, escape(safe_text(line)), style=style)
    console.print(grid, highlight=False)


def unpadded(console: Console, draw: Callable[[], None]) -> None:
    """What ``draw`` prints, each line without the padding rich's tables end it with."""
    with console.capture() as cap:
        draw()
    text = TRAILING.sub(r"\1", cap.get())
    console.print(Text.from_ansi(text, end=""), soft_wrap=True, end="", highlight=False)


TRAILING = re.compile(r"[ ]+((?:\x1b\[[0-9;]*m)*)$", re.M)
