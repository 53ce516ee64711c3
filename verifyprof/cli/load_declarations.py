"""What a user declares of several captures at ``whatif``/``report`` time (issue 41): which of a
program's options set its load (``--load-option --bs=batch``), and the context each capture ran
at where the capture itself does not say (``--capture-context C1=2048``)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from verifyprof.contracts.bounds import CONTEXT, check_number
from verifyprof.contracts.errors import VerifyprofError

AXES = ("batch", "num_draft", "context", "none")

LoadOptionOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--load-option",
        help=(
            "a program option that sets the load, not what runs: NAME=batch|num_draft|context"
            " (e.g. --load-option --speculate-k=num_draft), or NAME=none for one that only"
            " names a path to one input (--prompts=none); captures may differ in it (repeatable)"
        ),
    ),
]

CaptureContextOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--capture-context",
        help=(
            "the context (tokens per request) a capture ran at, where it does not say: N for"
            " every such capture, or LABEL=N for one (its folder's name; repeatable)"
        ),
    ),
]


def load_options(given: list[str] | None) -> tuple[tuple[str, str], ...]:
    """``--load-option NAME=AXIS`` as (NAME, AXIS) pairs (AXIS ``none``: not load, but captures
    may differ in it, as in an input's path that each capture's folder holds a copy of)."""
    out = []
    for text in given or []:
        name, eq, axis = text.rpartition("=")
        if not eq or not name or axis not in AXES:
            raise VerifyprofError(
                f"--load-option {text!r:.60}: NAME=AXIS, AXIS one of {', '.join(AXES)} (e.g."
                " --load-option --batch-size=batch, or --load-option --prompts=none for a path)"
            )
        if any(n == name for n, _ in out):
            raise VerifyprofError(f"--load-option: {name} given twice")
        out.append((name, axis))
    return tuple(out)


def capture_contexts(given: list[str] | None) -> tuple[tuple[str | None, float], ...]:
    """``--capture-context [LABEL=]N`` as (LABEL or None, N) pairs; each label once."""
    out: list[tuple[str | None, float]] = []
    for text in given or []:
        label, eq, value = text.rpartition("=")
        try:
            number = float(value)
        except ValueError:
            raise VerifyprofError(
                f"--capture-context {text!r:.60}: N or LABEL=N, N the context in tokens"
            ) from None
        check_number("--capture-context", number, CONTEXT)
        if number <= 0:
            raise VerifyprofError(f"--capture-context {text}: a context of 1 token or more")
        key = label if eq else None
        if any(k == key for k, _ in out):
            raise VerifyprofError(f"--capture-context: {key or 'N'} given twice")
        out.append((key, number))
    return tuple(out)


def declarations(load_option: list[str] | None, capture_context: list[str] | None) -> dict:
    """The declarations as WhatifOptions fields."""
    return {
        "load_options": load_options(load_option),
        "capture_contexts": capture_contexts(capture_context),
    }
