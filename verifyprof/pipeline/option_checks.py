"""The checks of a command's options made before any input is read: importing only what they
need (no pandas), so that a refused command answers its one line without loading the
analysis."""

from __future__ import annotations

from verifyprof.attribution.taxonomy import compile_regex
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.model.inputs.options import WhatifOptions, check_options

CYCLE_PARTS = ("spec_step", "draft", "accept", "draft_extend")  # never the verify


def check(options: WhatifOptions, parts: bool = False) -> None:
    """Every option, before any input is read or output written (``parts``: as in
    :func:`resolve_frame`)."""
    check_options(options)
    if options.step in CYCLE_PARTS and options.step_range is not None and not parts:
        raise VerifyprofError(f"--step {options.step}: not a verify step (see --step's help)")
    if options.step in ("decode", "prefill"):  # resolve_frame checks a step's name alike
        check_one_token(options.step, options.step, options.accept_len)
    if options.step_range is not None:  # one line before any file is read, not one per file
        compile_regex(
            options.step_range,
            f"--range '{options.step_range:.80}' is not a valid regular expression",
        )


def check_one_token(step: str, phase: str, accept_len: float | None) -> None:
    """A decode or prefill step makes one token per request: a speculative accept length with it
    is an impossible combination, refused in one line."""
    if accept_len is not None and accept_len != 1.0:
        raise VerifyprofError(
            f"--step {step}: a {phase} step makes one token per request, not {accept_len:g}:"
            " give no --accept-len (or 1), or model a verify step"
        )
