"""Names are data: text from a trace (kernel and range names, paths, messages quoting them)
made safe to print on a terminal.

A kernel or NVTX name can hold any bytes the traced program put there, escape sequences
included: ``ESC ] 0 ; ... BEL`` retitles the user's terminal, ``ESC [ 2 J`` clears it. Printed
through :func:`safe_text`, every control character shows as its escape instead (``\\x1b``,
``\\x07``, ``\\x9b``, ``\\u202e``) and does nothing: C0 (tab and newline only where the caller
keeps them), DEL, C1, and the bidirectional overrides that reorder what a line seems to say.
An ESC sequence is disarmed by its ESC: the rest of it is printable text.

A file name can hold bytes that are not UTF-8 (Python keeps each as a surrogate escape,
``'\\udcff'``, which no terminal encoding can print): it shows as the byte, ``\\xff``.
"""

from __future__ import annotations

import re
from typing import Any

_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_BYTE = range(0xDC80, 0xDD00)  # a byte of a name that is not UTF-8 (surrogateescape)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code in _BYTE:
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_SURROGATE = re.compile("[\ud800-\udfff]")


def undecodable_escaped(text: str) -> str:
    """``text`` with only what no encoder takes escaped: each byte of a name that was not UTF-8
    (a surrogate escape) as ``\\xff``, as :func:`safe_text` writes it; the rest unchanged."""
    return _SURROGATE.sub(_escaped, text) if not text.isascii() else text


def undecodable_data(data: Any) -> Any:
    """``data`` (dicts, lists, tuples: JSON's shapes) with :func:`undecodable_escaped` applied
    to every text in it, keys included; anything else as it is."""
    if isinstance(data, str):
        return undecodable_escaped(data)
    if isinstance(data, dict):
        return {undecodable_data(k): undecodable_data(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [undecodable_data(v) for v in data]
    return data


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


def signed(x: float, digits: int = 3) -> str:
    """``x`` with its sign, never "-0.000": a value that rounds to zero prints as +0."""
    text = f"{x:+.{digits}f}"
    return "+" + text[1:] if float(text) == 0 else text


def safe_lines(text: str) -> str:
    """``text`` with its line breaks kept and every other control character escaped, line by
    line: a multi-line message (a program's log tail, a list of hooks) reads as lines, and a
    line of it can still not drive the terminal (``\\r`` included)."""
    return "\n".join(safe_text(line) for line in text.split("\n"))
