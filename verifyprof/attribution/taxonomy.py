"""Kernel-name taxonomy: ordered regex rules (a TOML data file) -> phase.

Rules are matched once per *distinct* kernel name, not per kernel, so classification costs
nothing on million-kernel traces. The built-in rules live in ``verifyprof/data/taxonomy.toml``;
a ``taxonomy.toml`` in the user's data directory (:mod:`verifyprof.contracts.datafiles`) shadows
them, and ``--taxonomy FILE`` replaces both.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from verifyprof.contracts import datafiles, phases
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.plumbing.inputs import TOML_LIMIT, read_text

if TYPE_CHECKING:  # annotations only: --range is checked before numpy and pandas are loaded
    import numpy as np

    from verifyprof.trace.events import StringTable

OTHER = phases.INDEX["other"]
TAXONOMY_FILE = "taxonomy.toml"


@dataclass(frozen=True)
class Rule:
    phase: str
    pattern: re.Pattern[str]
    note: str = ""
    number: int = 0  # its [[rule]]'s place in the file, from 1: how a warning names it


@dataclass(frozen=True)
class ContextRule:
    """A kernel in phase ``source`` whose name matches ``pattern`` is booked to ``phase`` when the
    next GPU op on its device among the ``before`` and ``until`` phases is a ``before`` op (MoE
    routing's generic top-k and sort kernels run between the router GEMM and the expert GEMM)."""

    phase: str
    source: str
    pattern: re.Pattern[str]
    before: str
    until: tuple[str, ...]
    note: str = ""


@dataclass
class Taxonomy:
    rules: list[Rule]
    source: str  # "builtin" or the file path
    contexts: list[ContextRule] = field(default_factory=list)

    def phase_of(self, name: str) -> str:
        for rule in self.rules:
            if rule.pattern.search(name):
                return rule.phase
        return "other"

    def unmatched(self, names: list[str]) -> list[str]:
        """A warning for each pattern that matches none of ``names`` (the trace's kernel names,
        in full): a user's rule written for the short name ``kernels`` shows (``saxpy``) never
        matches ``saxpy(double *, ...)``, and would otherwise say nothing."""
        from verifyprof.attribution.kernel_names import short_kernel_name

        out = []
        for rule in self.rules:
            if any(rule.pattern.search(name) for name in names):
                continue
            short = next((n for n in names if rule.pattern.search(short_kernel_name(n))), None)
            hint = (
                f": it matches the short name of {short[:60]!r}; rules match the full name"
                if short is not None
                else ""
            )
            out.append(
                f"taxonomy rule {rule.number} ({rule.phase}) {rule.pattern.pattern[:60]!r}"
                f" matches no kernel of the trace{hint}"
            )
        return out

    def phase_of_ids(self, strings: StringTable, ids: np.ndarray) -> np.ndarray:
        """Phase index (into ``phases.ALL``) per string id, computed for the distinct ``ids`` only.

        Returns an array over the whole string table (unclassified ids read as ``other``) so
        callers can index it with a name-id column directly.
        """
        import numpy as np  # here, not at the top: the CLI's option checks import this module

        out = np.full(len(strings), OTHER, dtype=np.int8)
        for sid in np.unique(np.asarray(ids)):  # once per distinct kernel name
            if sid >= 0:
                out[sid] = phases.INDEX[self.phase_of(strings[int(sid)])]
        return out

    def in_context(
        self,
        strings: StringTable,
        name_id: np.ndarray,
        phase: np.ndarray,
        device: np.ndarray,
        start: np.ndarray,
    ) -> np.ndarray:
        """``phase`` (per GPU op) with the context rules applied: only ops of a matching name and
        the ops that decide for them (their ``before`` / ``until`` phases) are sorted."""
        import numpy as np

        for rule in self.contexts:
            booked = (phase == phases.INDEX[rule.source]) & (name_id >= 0)
            ids = np.unique(name_id[booked])  # each distinct kernel name tested once
            named = ids[[rule.pattern.search(strings[int(i)]) is not None for i in ids]]
            candidate = booked & np.isin(name_id, named)
            if not candidate.any():
                continue
            marker = np.isin(phase, [phases.INDEX[p] for p in (rule.before, *rule.until)])
            picked = np.flatnonzero(candidate | marker)
            order = picked[np.lexsort((start[picked], device[picked]))]  # by device, then time
            is_marker = marker[order]
            at = np.where(is_marker, np.arange(len(order)), len(order))
            following = np.minimum.accumulate(at[::-1])[
                ::-1
            ]  # the next marker at or after each position
            found = following < len(order)
            nxt = order[np.minimum(following, len(order) - 1)]
            hit = (
                ~is_marker
                & found
                & (device[nxt] == device[order])
                & (phase[nxt] == phases.INDEX[rule.before])
            )
            if hit.any():
                phase = phase.copy()
                phase[order[hit]] = phases.INDEX[rule.phase]
        return phase


def load_taxonomy(path: Path | str | None = None) -> Taxonomy:
    """``path``, else the user's ``taxonomy.toml`` in the data directory, else the built-in
    rules; each file read and parsed once per process (:func:`~verifyprof.contracts.datafiles.
    read_once`: a command asks from several places; the rules are never changed once read)."""
    if path is None:
        path = datafiles.locate(TAXONOMY_FILE)
        if path is None or path == datafiles.BUILTIN / TAXONOMY_FILE:
            builtin = datafiles.BUILTIN / TAXONOMY_FILE
            return datafiles.read_once(builtin, "taxonomy", _builtin)
    return datafiles.read_once(Path(path), "taxonomy", _user)


def _builtin(path: Path) -> Taxonomy:
    return parse_taxonomy(path.read_text(), "builtin")


def _user(path: Path) -> Taxonomy:
    text = read_text(path, "taxonomy", TOML_LIMIT)  # a regular file, size-checked, UTF-8
    return parse_taxonomy(text, str(path))


def parse_taxonomy(text: str, source: str) -> Taxonomy:
    where = None if source == "builtin" else Path(source)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise VerifyprofError(f"taxonomy is not valid TOML: {exc}", where) from None
    _check_keys(data, TOP_KEYS, "taxonomy", where)
    if data.get("version", 1) != 1:
        raise VerifyprofError(
            f"taxonomy version {data['version']!r} is not one this verifyprof reads (1)", where
        )
    rules: list[Rule] = []
    for n, entry in enumerate(_entries(data, "rule", where), start=1):
        _check_keys(entry, RULE_KEYS, f"taxonomy rule {n}", where)
        phase = entry.get("phase")
        if phase not in BOOKED:
            raise VerifyprofError(
                f"taxonomy rule {n}: phase {phase!r} is not one of {', '.join(BOOKED)}", where
            )
        rules += [
            Rule(phase, regex, entry.get("note", ""), n)
            for regex in _regexes(entry, f"taxonomy rule {n} ({phase})", where)
        ]
    if not rules:
        raise VerifyprofError("taxonomy has no [[rule]] entries", where)
    return Taxonomy(
        rules,
        source,
        [
            _context(n, entry, where)
            for n, entry in enumerate(_entries(data, "context", where), start=1)
        ],
    )


BOOKED = tuple(
    p for p in phases.PRIORITY if p not in phases.COPIES
)  # phases a rule can book a kernel to
TOP_KEYS = ("version", "rule", "context")
RULE_KEYS = ("phase", "patterns", "pattern", "note")
CONTEXT_KEYS = ("phase", "from", "before", "until", "patterns", "pattern", "note")


def _check_keys(table: dict, known: tuple[str, ...], what: str, where: Path | None) -> None:
    """A key the format does not have is a typo (``untill``, ``[[rules]]``), never silently
    ignored."""
    unknown = [k for k in table if k not in known]
    if unknown:
        raise VerifyprofError(
            f"{what}: unknown key {unknown[0]!r} (known: {', '.join(known)})", where
        )


def _entries(data: dict, key: str, where: Path | None) -> list[dict]:
    entries = data.get(key, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise VerifyprofError(
            f"taxonomy: '{key}' must be an array of tables, written [[{key}]]", where
        )
    return entries


def _regexes(entry: dict, what: str, where: Path | None) -> list[re.Pattern[str]]:
    """A rule's regexes, compiled: ``patterns`` (a list, or one string) or ``pattern``; an error
    names the rule and the pattern that is not a string or not a regex."""
    patterns = entry.get("patterns", entry.get("pattern", []))
    patterns = [patterns] if isinstance(patterns, str) else patterns
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise VerifyprofError(
            f"{what}: patterns must be a list of regular expressions (strings)", where
        )
    if not patterns:
        raise VerifyprofError(f"{what} has no patterns", where)
    return [compile_regex(text, f"{what}: bad regex {text!r:.80}", where) for text in patterns]


def compile_regex(text: str, what: str, where: Path | str | None = None) -> re.Pattern[str]:
    """``re.compile(text)``; a pattern Python cannot compile (a syntax error, a repetition count
    such as ``a{99999999999}`` that overflows, nesting past the recursion limit) is a
    VerifyprofError: ``what``, then why."""
    try:
        return re.compile(text)
    except (re.error, OverflowError, RecursionError, ValueError) as exc:
        raise VerifyprofError(f"{what}: {exc}", where) from None


def _context(n: int, entry: dict, where: Path | None) -> ContextRule:
    """One ``[[context]]`` entry, every field checked (a bad one is one line naming the rule)."""
    what = f"taxonomy context rule {n}"
    _check_keys(entry, CONTEXT_KEYS, what, where)
    for key in ("phase", "from", "before"):
        if key not in entry:
            raise VerifyprofError(
                f"{what}: missing '{key}' (phase, from, before and patterns are needed)", where
            )
    until = entry.get("until", [])
    until = [until] if isinstance(until, str) else until
    if not isinstance(until, list):
        raise VerifyprofError(f"{what}: until must be a phase or a list of phases", where)
    for key, value in (
        ("phase", entry["phase"]),
        ("from", entry["from"]),
        ("before", entry["before"]),
        *(("until", u) for u in until),
    ):
        if value not in BOOKED:
            raise VerifyprofError(
                f"{what}: {key} {value!r} is not one of {', '.join(BOOKED)}", where
            )
    if (
        entry["from"] == entry["before"]
        or entry["from"] in until
        or entry["from"] == entry["phase"]
    ):
        raise VerifyprofError(
            f"{what}: from {entry['from']!r} is also its phase or a phase it looks for"
            " (before/until): it could never change anything",
            where,
        )
    regexes = _regexes(entry, f"{what} ({entry['phase']})", where)
    pattern = re.compile(
        "|".join(f"(?:{r.pattern})" for r in regexes)
    )  # one search per distinct name
    return ContextRule(
        entry["phase"], entry["from"], pattern, entry["before"], tuple(until), entry.get("note", "")
    )
