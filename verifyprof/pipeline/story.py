"""The step group a run's story is about, shared by ``report``'s pages and ``kernels``."""

from __future__ import annotations

from typing import Any

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.schema import BreakdownFrame, variant
from verifyprof.model.inputs.profile import verify_profile


def story_group(frame: BreakdownFrame, summary: dict[str, Any]) -> tuple[tuple[str, str], str]:
    """The step group a run's story is about: the verify group the model picks (and why), else
    the summary's first group."""
    try:
        profile = verify_profile(frame)
        return (profile.verify.name, variant(profile.verify.attrs)), profile.choice
    except VerifyprofError:
        groups = summary.get("groups") or []
        if not groups:
            return ("", ""), "no steps"
        return (groups[0]["name"], groups[0]["variant"]), "the summary's first group (no verify)"


def check_picked(frame: BreakdownFrame, step: str | None, width: int | None, mode: str | None):
    """``--width`` / ``--mode`` given and no group has them: the model's one line naming the widths
    and modes there are (as whatif refuses them), never another group shown in silence."""
    if width is not None or mode is not None:
        verify_profile(frame, step_name=step, width=width, mode=mode)
