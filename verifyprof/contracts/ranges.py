"""The NVTX range names verifyprof emits and looks for, defined once.

Hooks (capture), the bundled workload and step detection (attribution) all import these, so a
trace captured with verifyprof's hooks is always found by ``breakdown``'s default ``--range``.
A range's text is the bare name, optionally followed by space-separated ``key=value``
attributes (``verifyprof.verify bs=1 tokens=4 graph=1``); attribution reads them back.
"""

from __future__ import annotations

import re

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

PHASE_RANGES: tuple[str, ...] = (SPEC_STEP, DRAFT, VERIFY, ACCEPT, DRAFT_EXTEND, DECODE, PREFILL)

# Short phase name (as used by hook presets and ``--hook target=phase``) -> range name.
BY_PHASE: dict[str, str] = {name.removeprefix("verifyprof."): name for name in PHASE_RANGES}

# SGLang's own record_function spans for the verify forward: ``step[TARGET_VERIFY bs=N]``.
SGLANG_VERIFY_PATTERN = r"TARGET_VERIFY"

DEFAULT_STEP_REGEX = (
    r"^verifyprof\.(spec_step|draft|verify|accept|draft_extend|decode)(\s|$)|"
    + SGLANG_VERIFY_PATTERN
)

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


def _user(word: str, not_before: str = "") -> str:
    """A user's own range whose name (first word, not ``verifyprof.``) holds ``word`` as a word:
    ``verify_eager``, ``spec.verify``, ``Verify`` (``_`` counts as a separator)."""
    return rf"^(?!verifyprof\.)(?i:[^\s\[]*?(?<![a-z0-9]){word}(?![a-z0-9]{not_before}))"


# Phase -> patterns (``re.search`` on a range's text), one per source: verifyprof's own ranges,
# SGLang's ``step[<ForwardMode> bs=N]`` record_function spans, and user ranges named for the phase.
# SGLang's DECODE is the plain decode step; a speculative server's draft forwards also run as
# DECODE on the draft worker, so use verifyprof's hooks (``capture --hooks sglang``) to tell them
# apart.
PHASE_PATTERNS: dict[str, tuple[str, ...]] = {
    "spec_step": (r"^verifyprof\.spec_step(\s|$)", _user("spec_step")),
    "draft": (r"^verifyprof\.draft(\s|$)", _user("draft", r"|[_.-]?extend")),
    "verify": (r"^verifyprof\.verify(\s|$)", SGLANG_VERIFY_PATTERN, _user("verify")),
    "accept": (r"^verifyprof\.accept(\s|$)", _user("accept")),
    "draft_extend": (
        r"^verifyprof\.draft_extend(\s|$)",
        r"step\[DRAFT_EXTEND(_V2)?[\s\]]",
        _user(r"draft[_.-]?extend"),
    ),
    "decode": (r"^verifyprof\.decode(\s|$)", r"step\[DECODE[\s\]]", _user("decode")),
    "prefill": (
        r"^verifyprof\.prefill(\s|$)",
        r"step\[(EXTEND|SPLIT_PREFILL|PREFILL)[\s\]]",
        _user("prefill"),
    ),
}
PHASES: tuple[str, ...] = tuple(PHASE_PATTERNS)
_PHASE_RES = {
    phase: re.compile("|".join(f"(?:{p})" for p in pats)) for phase, pats in PHASE_PATTERNS.items()
}


def phase_regex(phase: str) -> str:
    """The ``--range`` regex selecting one phase's steps from every source; ValueError if
    unknown."""
    if phase not in PHASE_PATTERNS:
        raise ValueError(f"unknown step phase {phase!r} (phases: {', '.join(PHASES)})")
    return _PHASE_RES[phase].pattern


def phase_of(text: str) -> str | None:
    """The phase a range's text or a step's name belongs to (None: no known phase)."""
    return next((phase for phase, rx in _PHASE_RES.items() if rx.search(text)), None)


def is_phase(text: str, phase: str) -> bool:
    """Whether a range's text or step name is a ``phase`` step (``is_phase(name, "verify")``)."""
    return bool(_PHASE_RES[phase].search(text))


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
