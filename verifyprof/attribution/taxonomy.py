"""Kernel-name taxonomy: ordered regex rules (a TOML data file) -> phase.

Rules are matched once per *distinct* kernel name, not per kernel, so classification costs
nothing on million-kernel traces. The built-in rules live in ``verifyprof/data/taxonomy.toml``;
a ``taxonomy.toml`` in the user's data directory (:mod:`verifyprof.contracts.datafiles`) shadows
them, and ``--taxonomy FILE`` replaces both.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from verifyprof.contracts import datafiles, phases
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.trace.events import StringTable

OTHER = phases.INDEX["other"]
TAXONOMY_FILE = "taxonomy.toml"


@dataclass(frozen=True)
class Rule:
    phase: str
    pattern: re.Pattern[str]
    note: str = ""


@dataclass
class Taxonomy:
    rules: list[Rule]
    source: str  # "builtin" or the file path

    def phase_of(self, name: str) -> str:
        for rule in self.rules:
            if rule.pattern.search(name):
                return rule.phase
        return "other"

    def phase_of_ids(self, strings: StringTable, ids: np.ndarray) -> np.ndarray:
        """Phase index (into ``phases.ALL``) per string id, computed for the distinct ``ids`` only.

        Returns an array over the whole string table (unclassified ids read as ``other``) so
        callers can index it with a name-id column directly.
        """
        out = np.full(len(strings), OTHER, dtype=np.int8)
        for sid in np.unique(np.asarray(ids)):  # once per distinct kernel name
            if sid >= 0:
                out[sid] = phases.INDEX[self.phase_of(strings[int(sid)])]
        return out


def load_taxonomy(path: Path | str | None = None) -> Taxonomy:
    """``path``, else the user's ``taxonomy.toml`` in the data directory, else the built-in rules."""
    if path is None:
        path = datafiles.locate(TAXONOMY_FILE)
        if path is None or path == datafiles.BUILTIN / TAXONOMY_FILE:
            return parse_taxonomy((datafiles.BUILTIN / TAXONOMY_FILE).read_text(), "builtin")
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise VerifyprofError(f"cannot read taxonomy: {exc.strerror}", path) from None
    except UnicodeDecodeError as exc:
        raise VerifyprofError(f"taxonomy is not UTF-8 text: {exc.reason} at byte {exc.start}", path) from None
    return parse_taxonomy(text, str(path))


def parse_taxonomy(text: str, source: str) -> Taxonomy:
    where = None if source == "builtin" else Path(source)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise VerifyprofError(f"taxonomy is not valid TOML: {exc}", where) from None
    rules: list[Rule] = []
    for n, entry in enumerate(data.get("rule", []), start=1):
        phase = entry.get("phase")
        if phase not in phases.PRIORITY or phase in phases.COPIES:
            allowed = ", ".join(p for p in phases.PRIORITY if p not in phases.COPIES)
            raise VerifyprofError(f"taxonomy rule {n}: phase {phase!r} is not one of {allowed}", where)
        patterns = entry.get("patterns") or ([entry["pattern"]] if "pattern" in entry else [])
        if not patterns:
            raise VerifyprofError(f"taxonomy rule {n} ({phase}) has no patterns", where)
        for pattern in patterns:
            try:
                rules.append(Rule(phase, re.compile(pattern), entry.get("note", "")))
            except re.error as exc:
                raise VerifyprofError(f"taxonomy rule {n} ({phase}): bad regex {pattern!r}: {exc}", where) from None
    if not rules:
        raise VerifyprofError("taxonomy has no [[rule]] entries", where)
    return Taxonomy(rules, source)
