"""The step group a run's story is about, shared by ``report``'s pages and ``kernels``."""

from __future__ import annotations

from typing import Any

from verifyprof.contracts.errors import NoStepsError, VerifyprofError
from verifyprof.contracts.ranges import is_phase
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
    if width is None and mode is None:
        return
    try:
        verify_profile(frame, step_name=step, width=width, mode=mode)
    except NoStepsError as err:
        if step is None or is_phase(step, "verify"):
            raise
        # the model words it for the verify; these are another phase's steps (--step draft)
        problem = err.problem.replace("no verify steps", f"no {step!r} steps", 1)
        problem = problem.replace("(the breakdown has", f"(the {step!r} steps have", 1)
        raise NoStepsError(problem, err.path) from None
