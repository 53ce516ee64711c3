"""``capture --result NAME=REGEX``: numbers a program prints rather than writes. Most programs
(gpt-fast's ``generate.py`` among them) print their rate and accept length and write no
``results.json``; after the program exits, the last match of REGEX in its log gives, from its
first group, ``results[NAME]``. A pattern that finds nothing is one line in the manifest's
``results.result_problems``, never a crash; a pattern that cannot work is refused before
anything starts. ``NAME[]=REGEX`` keeps every match, in order, as a list: a program's rate per
sample (``tokens_per_s_samples[]``), whose median anchors the capture where its average would
carry a cold first sample (:func:`verifyprof.capture.program_flow.program_dilation`)."""

from __future__ import annotations

import re
from pathlib import Path

from verifyprof.contracts.errors import VerifyprofError

LOG_TAIL_BYTES = 64 * 1024 * 1024  # the numbers a program prints last are at the end of its log
PROBLEMS = "result_problems"
EVERY = "[]"  # NAME[]=REGEX: every match, as a list
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def parse_result_specs(specs: list[str] | tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """``NAME=REGEX`` items as (name, pattern); a malformed one is a VerifyprofError (exit 2)."""
    out: list[tuple[str, str]] = []
    for spec in specs:
        name, eq, pattern = spec.partition("=")
        name = name.strip()
        bare = name.removesuffix(EVERY)
        if not eq or not _NAME.match(bare) or not pattern:
            raise VerifyprofError(
                f"--result {spec!r}: expected NAME=REGEX, e.g. --result"
                " 'tokens_per_s=Average tokens/sec: ([0-9.]+)'"
            )
        try:
            groups = re.compile(pattern).groups
        except re.error as exc:
            raise VerifyprofError(f"--result {name}: {pattern!r} is not a regex: {exc}") from None
        if groups < 1:
            raise VerifyprofError(
                f"--result {name}: {pattern!r} has no group: put the number in ( ), e.g."
                f" '{name}=rate: ([0-9.]+)'"
            )
        if bare in (n.removesuffix(EVERY) for n, _ in out):
            raise VerifyprofError(f"--result {bare} is given twice")
        out.append((name, pattern))
    return tuple(out)


def _tail_text(log: Path) -> str | None:
    try:
        with log.open("rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - LOG_TAIL_BYTES))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return None


def results_from_log(log: Path, patterns: tuple[tuple[str, str], ...]) -> dict:
    """``{NAME: number}`` from the last match of each pattern in ``log``, and under
    ``result_problems`` one line for each pattern that gave no number."""
    if not patterns:
        return {}
    text = _tail_text(log)
    found: dict = {}
    problems: list[str] = []
    for name, pattern in patterns:
        if text is None:
            problems.append(f"--result {name}: no program log at {log.name}")
            continue
        matches = list(re.finditer(pattern, text, re.MULTILINE))
        if not matches:
            problems.append(f"--result {name}: {pattern!r} matched nothing in {log.name}")
            continue
        every, key = name.endswith(EVERY), name.removesuffix(EVERY)
        numbers = []
        for match in matches if every else matches[-1:]:
            value = match.group(1)
            try:
                number = float((value or "").replace(",", ""))
            except ValueError:
                which = "a match" if every else "the last match"
                problems.append(f"--result {name}: {which} gave {value!r}, not a number")
                break
            numbers.append(int(number) if number.is_integer() and "." not in value else number)
        else:
            found[key] = numbers if every else numbers[0]
    if problems:
        found[PROBLEMS] = problems
    return found
