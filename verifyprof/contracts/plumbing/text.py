"""Names are data: text from a trace (kernel and range names, paths, messages quoting them)
made safe to print on a terminal.

A kernel or NVTX name can hold any bytes the traced program put there, escape sequences
included: ``ESC ] 0 ; ... BEL`` retitles the user's terminal, ``ESC [ 2 J`` clears it. Printed
through :func:`safe_text`, every control character shows as its escape instead (``\\x1b``,
``\\x07``, ``\\x9b``, ``\\u202e``) and does nothing: C0 (tab and newline only where the caller
keeps them), DEL, C1, and the bidirectional overrides that reorder what a line seems to say.
An ESC sequence is disarmed by its ESC: the rest of it is printable text.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(text: str, keep: str = "") -> str:
    """``text`` with every control character written as its escape, except those in ``keep``
    (``"\\n"`` for a message whose line breaks are meant). Printable text is unchanged."""
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(lambda m: m.group() if m.group() in keep else _escaped(m), text)


def counted(n: float, word: str, plural: str | None = None) -> str:
    """``n word``, the word plural unless ``n`` is one: "1 launch", "2 launches", "1.5 steps".
    ``plural`` when adding "s" is wrong ("launch" -> "launches" is handled: -ch, -sh, -s, -x)."""
    text = f"{n:g}" if isinstance(n, float) else str(n)
    if n == 1:
        return f"{text} {word}"
    if plural is None:
        plural = word + ("es" if word.endswith(("ch", "sh", "s", "x")) else "s")
    return f"{text} {plural}"


def safe_lines(text: str) -> str:
    """``text`` with its line breaks kept and every other control character escaped, line by
    line: a multi-line message (a program's log tail, a list of hooks) reads as lines, and a
    line of it can still not drive the terminal (``\\r`` included)."""
    return "\n".join(safe_text(line) for line in text.split("\n"))
