"""The capture that would measure a load the curve only extrapolates, in the user's own words:
the program's command as the captures ran it, its batch option holding ``{batch}`` (issue 41:
they type their own program's command, so the advice does too). Where the batch option is not
known, the placeholder form ``PROGRAM ... --batch {batch}`` says what to fill in."""

from __future__ import annotations

import shlex

from verifyprof.contracts.manifest import Manifest
from verifyprof.model.decision.capture_facts import load_axis, load_template, target_of

PLACEHOLDER_PROGRAM = "PROGRAM ... --batch {batch}"
# the batch options any program may spell so (capture_identity's well-known names)
BATCH_OPTIONS = frozenset({"--batch", "--batch-size", "--bs"})
CONTEXT_OPTIONS = frozenset({"--context", "--ctx"})


def program_template(
    manifest: Manifest | None,
    batch_options: frozenset[str] = frozenset(),
    context_options: frozenset[str] = frozenset(),
) -> tuple[str, ...] | None:
    """Today's capture's command with its batch as ``{batch}`` and, where its context option is
    known, its context as ``{context}``: the template ``capture`` recorded (its draft count
    filled in), else its command with the values of those options (``*_options``: found on
    evidence, declared, or well known) replaced; None where no argument is the batch."""
    template = load_template(manifest)
    if template is not None:
        argv = list(template)
        got = load_axis(manifest, "num_draft")
        if got is not None:
            argv = [a.replace("{num_draft}", f"{got[0]:g}") for a in argv]
    else:
        argv = _placed(
            _placed(list(target_of(manifest)), batch_options, "{batch}"),
            context_options,
            "{context}",
        )
    return tuple(argv) if any("{batch}" in a for a in argv) else None


def _placed(argv: list[str], options: frozenset[str], placeholder: str) -> list[str]:
    """``argv`` with the value of the first of ``options`` as ``placeholder``."""
    for i, arg in enumerate(argv):
        name, eq, _ = arg.partition("=")
        if eq and name in options:
            return [*argv[:i], f"{name}={placeholder}", *argv[i + 1 :]]
        if arg in options and i + 1 < len(argv):
            return [*argv[: i + 1], placeholder, *argv[i + 2 :]]
    return argv


def capture_command(
    program: tuple[str, ...] | None, loads: str, context: float, say_context: bool
) -> str:
    """``verifyprof capture --batches LOADS --out DIR -- <the program>`` at ``context``
    (``say_context``: it differs from, or is one of several of, the captures' contexts)."""
    if program is None:
        ctx = f" --context {context:g}" if say_context else ""
        return f"verifyprof capture --batches {loads} --out DIR -- {PLACEHOLDER_PROGRAM}{ctx}"
    words = " ".join(
        a.replace("{context}", f"{context:g}") if "{" in a else shlex.quote(a) for a in program
    )
    command = f"verifyprof capture --batches {loads} --out DIR -- {words}"
    if say_context and not any("{context}" in a for a in program):
        command += f"  # at context {context:g}: the program's own option for it"
    return command
