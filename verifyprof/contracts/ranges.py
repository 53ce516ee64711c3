"""The NVTX range names verifyprof emits and looks for, defined once.

Hooks (capture), the bundled workload and step detection (attribution) all import these, so a
trace captured with verifyprof's hooks is always found by ``breakdown``'s default ``--range``.
A range's text is the bare name, optionally followed by space-separated ``key=value``
attributes (``verifyprof.verify bs=1 tokens=4 graph=1``); attribution reads them back.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from verifyprof.contracts.errors import VerifyprofError

DOMAIN = "verifyprof"

SPEC_STEP = (  # one whole speculative iteration: draft + verify + accept + draft_extend
    "verifyprof.spec_step"
)
DRAFT = "verifyprof.draft"  # the drafter proposing k tokens
VERIFY = "verifyprof.verify"  # the target model's verify forward over k+1 (or tree) tokens
ACCEPT = "verifyprof.accept"  # comparing/sampling against the drafts, choosing the accepted prefix
DRAFT_EXTEND = "verifyprof.draft_extend"  # the drafter catching up on accepted tokens
DECODE = "verifyprof.decode"  # a plain (non-speculative) decode step, the baseline
PREFILL = "verifyprof.prefill"
# Derived, never emitted: one speculative cycle's window where no range spans the cycle
# (attribution.cycles): from its first phase's start to the next cycle's.
CYCLE_WINDOW = "cycle_window"

PHASE_RANGES: tuple[str, ...] = (SPEC_STEP, DRAFT, VERIFY, ACCEPT, DRAFT_EXTEND, DECODE, PREFILL)

# Short phase name (as used by hook presets and ``--hook target=phase``) -> range name.
BY_PHASE: dict[str, str] = {name.removeprefix("verifyprof."): name for name in PHASE_RANGES}


_ATTR = re.compile(r"(\w+)=(\S+)")


def range_text(name: str, **attrs: object) -> str:
    """The text of a range: its name plus ``key=value`` attributes (None values dropped)."""
    parts = [name] + [f"{k}={_fmt(v)}" for k, v in attrs.items() if v is not None]
    return " ".join(parts)


def split_text(text: str) -> tuple[str, dict[str, str]]:
    """Inverse of :func:`range_text`: the base name and its attributes."""
    head, _, rest = text.partition(" ")
    return head, dict(_ATTR.findall(rest))


def _fmt(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


# --- steps by phase (``--step verify``): one table, data not code --------------------------------


def _user(words: list[str], unless: list[str]) -> str:
    """A user's own range whose name (first word, not ``verifyprof.``) holds one of ``words`` as
    a word and none of ``unless`` anywhere: ``verify_eager``, ``spec.verify``, ``Verify``."""
    word = "|".join(words)
    no = rf"(?![^\s\[]*?(?:{'|'.join(unless)}))" if unless else ""
    return rf"^(?!verifyprof\.){no}(?i:[^\s\[]*?(?<![a-z0-9])(?:{word})(?![a-z0-9]))"


def _phase_patterns() -> dict[str, tuple[str, ...]]:
    """Phase -> patterns (``re.search`` on a range's text): verifyprof's own ranges, SGLang's
    spans and user ranges named for the phase, from ``data/ranges.toml`` (or the user's)."""
    from verifyprof.contracts.datafiles import locate, read_toml

    path = locate("ranges.toml")
    if path is None:  # pragma: no cover - the package ships it
        raise VerifyprofError("verifyprof's data file ranges.toml is missing")
    out: dict[str, tuple[str, ...]] = {}
    for entry in read_toml(path).get("phase", []):
        name = str(entry["name"])
        pats = [rf"^verifyprof\.{name}(\s|$)", *map(str, entry.get("sglang", []))]
        if entry.get("words"):
            pats.append(
                _user([str(w) for w in entry["words"]], [str(u) for u in entry.get("unless", [])])
            )
        for pattern in pats:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise VerifyprofError(f"phase {name}: pattern {pattern!r}: {exc}", path) from None
        out[name] = tuple(pats)
    missing = [p for p in BY_PHASE if p not in out]
    if missing:
        raise VerifyprofError(f"no [[phase]] for {', '.join(missing)}", path)
    return out


@dataclass(frozen=True)
class _Phases:
    patterns: dict[str, tuple[str, ...]]
    res: dict[str, re.Pattern[str]]
    default_step_regex: str


@functools.cache
def _phases() -> _Phases:
    """Read once, at first use (never at import: an unreadable user data folder is then one
    line from the command that needed it, not a traceback from ``--version``)."""
    patterns = _phase_patterns()
    return _Phases(
        patterns,
        {phase: re.compile("|".join(f"(?:{p})" for p in pats)) for phase, pats in patterns.items()},
        # The default --range: every phase's ranges from every source, but prefill (not a
        # cycle's part).
        "|".join(
            f"(?:{p})" for phase, pats in patterns.items() if phase != "prefill" for p in pats
        ),
    )


def __getattr__(name: str) -> object:
    """``PHASE_PATTERNS`` (phase -> patterns), ``PHASES`` (their names) and
    ``DEFAULT_STEP_REGEX``, read from ``ranges.toml`` when first asked for. SGLang's DECODE is
    the plain decode step; a speculative server's draft forwards also run as DECODE on the draft
    worker, so use verifyprof's hooks (``capture --hooks sglang``) to tell them apart."""
    if name == "PHASE_PATTERNS":
        return _phases().patterns
    if name == "PHASES":
        return tuple(_phases().patterns)
    if name == "DEFAULT_STEP_REGEX":
        return _phases().default_step_regex
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def phase_regex(phase: str) -> str:
    """The ``--range`` regex selecting one phase's steps from every source; ValueError if
    unknown."""
    res = _phases().res
    if phase not in res:
        raise ValueError(f"unknown step phase {phase!r} (phases: {', '.join(res)})")
    return res[phase].pattern


def phase_of(text: str) -> str | None:
    """The phase a range's text or a step's name belongs to (None: no known phase)."""
    return next((phase for phase, rx in _phases().res.items() if rx.search(text)), None)


def is_phase(text: str, phase: str) -> bool:
    """Whether a range's text or step name is a ``phase`` step (``is_phase(name, "verify")``)."""
    return bool(_phases().res[phase].search(text))


_ATTR_TEXT = re.compile(r"\s+\w+=[\w.]+")
_DIGITS = re.compile(r"\d+")


def step_name(text: str) -> str:
    """A step's name: its text minus its ``key=value`` attributes (``verify_eager step=0`` ->
    ``verify_eager``, ``step[TARGET_VERIFY bs=4]`` -> ``step[TARGET_VERIFY]``). Outside
    verifyprof's own ranges, the numbers left become N (``layer 3`` -> ``layer N``), so one
    name groups the steps that differ only by a counter."""
    if text.startswith(DOMAIN + "."):
        return split_text(text)[0]
    return _DIGITS.sub("N", _ATTR_TEXT.sub("", text))
