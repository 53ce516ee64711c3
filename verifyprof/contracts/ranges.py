"""The NVTX range names verifyprof emits and looks for, defined once.

Hooks (capture), the bundled workload and step detection (attribution) all import these, so a
trace captured with verifyprof's hooks is always found by ``breakdown``'s default ``--range``.
A range's text is the bare name, optionally followed by space-separated ``key=value``
attributes (``verifyprof.verify bs=1 tokens=4 graph=1``); attribution reads them back.
"""

from __future__ import annotations

import re

DOMAIN = "verifyprof"

SPEC_STEP = "verifyprof.spec_step"  # one whole speculative iteration: draft + verify + accept + draft_extend
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
    r"^verifyprof\.(spec_step|draft|verify|accept|draft_extend|decode)(\s|$)|" + SGLANG_VERIFY_PATTERN
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
