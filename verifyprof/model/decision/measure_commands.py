"""The capture that would measure a load the curve only extrapolates, in the user's own words:
the program's command as the captures ran it, its batch option holding ``{batch}`` (issue 41:
they type their own program's command, so the advice does too). Where the batch option is not
known, the placeholder form ``PROGRAM ... --batch {batch}`` says what to fill in."""

from __future__ import annotations

import shlex
from pathlib import Path

from verifyprof.contracts.capture_again import LOAD_CAPTURE_OPTIONS, number_word
from verifyprof.contracts.manifest import Manifest
from verifyprof.model.decision import capture_facts as facts
from verifyprof.model.decision.capture_facts import load_axis, load_template, target_of

PLACEHOLDER_PROGRAM = "PROGRAM ... --batch {batch}"
# the options read by name as a program's batch and context (capture_facts': one list)
BATCH_OPTIONS = frozenset(facts.BATCH_OPTIONS)
CONTEXT_OPTIONS = frozenset(facts.CONTEXT_OPTIONS)


def program_template(
    manifest: Manifest | None,
    batch_options: frozenset[str] = frozenset(),
    context_options: frozenset[str] = frozenset(),
) -> tuple[str, ...] | None:
    """What the capture of another load runs: the capture's own options (its hooks, --result,
    --decode-cmd ..., less its --out and load lists), ``--``, and today's command with its
    batch as ``{batch}`` and, where its context option is known, its context as ``{context}``:
    the template ``capture`` recorded (its draft count filled in), else its command with the
    values of those options (``*_options``: found on evidence, declared, or well known)
    replaced; None where the capture's command is not known."""
    template = load_template(manifest)
    if template is not None:
        argv = list(template)
        got = load_axis(manifest, "num_draft")
        if got is not None:
            argv = [a.replace("{num_draft}", f"{got[0]:g}") for a in argv]
    else:
        argv = _placed(list(target_of(manifest)), batch_options, "{batch}")
        argv = _placed(argv, context_options, "{context}")
    return (*_capture_options(manifest), "--", *argv) if argv else None


def again_source(manifest: Manifest | None) -> str | None:
    """The capture folder ``capture --again`` can repeat at other batches: one whose manifest
    recorded its command with the batch as ``{batch}`` (``capture --batches``); else None."""
    template = load_template(manifest)
    if manifest is None or template is None or not any("{batch}" in a for a in template):
        return None
    path = Path(manifest.path)
    return str(path.parent if path.name.endswith(".json") else path)


def _capture_options(manifest: Manifest | None) -> list[str]:
    """The options the capture itself ran with (its manifest's ``command.verifyprof``), less
    those that say where it went and at which loads."""
    raw = manifest.raw if manifest is not None and isinstance(manifest.raw, dict) else {}
    command = raw.get("command")
    argv = command.get("verifyprof") if isinstance(command, dict) else None
    if not isinstance(argv, list) or "capture" not in argv:
        return []
    argv = [str(a) for a in argv]
    tail = argv[argv.index("capture") + 1 :]
    tail = tail[: tail.index("--")] if "--" in tail else tail
    out, skip = [], False
    for arg in tail:
        name = arg.split("=", 1)[0]
        if skip:
            skip = False
        elif name in LOAD_CAPTURE_OPTIONS:
            skip = "=" not in arg and LOAD_CAPTURE_OPTIONS[name]
        else:
            out.append(arg)
    return out


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
    template: tuple[str, ...] | None,
    loads: str,
    context: float,
    say_context: bool,
    source: str | None = None,
) -> str:
    """``verifyprof capture [its options] --batches LOADS --out DIR -- <the program>`` at
    ``context`` (``say_context``: it differs from, or is one of several of, the captures'
    contexts), every argument quoted for a POSIX shell; what the command cannot say (no known
    batch or context option) follows it as a comment. Where ``source`` recorded that command
    (:func:`again_source`), ``verifyprof capture --again SOURCE --batches LOADS --out DIR``."""
    if template is not None and source is not None:
        program = template[template.index("--") + 1 :]
        has_context = any("{context}" in a for a in program)
        command = f"verifyprof capture --again {shlex.quote(source)} --batches {loads}"
        command += f" --contexts {number_word(context)}" if has_context else ""  # never its own
        command += " --out DIR"
        if say_context and not has_context:
            command += f"  # and its context option at {context:g}: its program after --"
        return command
    if template is None:
        ctx = f" --context {context:g}" if say_context else ""
        return f"verifyprof capture --batches {loads} --out DIR -- {PLACEHOLDER_PROGRAM}{ctx}"
    cut = template.index("--")
    options, program = template[:cut], template[cut + 1 :]
    words = [shlex.quote(a.replace("{context}", f"{context:g}")) for a in program]
    head = " ".join(shlex.quote(a) for a in options)
    command = f"verifyprof capture {head + ' ' if head else ''}--batches {loads} --out DIR --"
    command += " " + " ".join(words)
    missing = []
    if not any("{batch}" in a for a in program):
        missing.append("its batch option's value as {batch}")
    if say_context and not any("{context}" in a for a in program):
        missing.append(f"its context option at {context:g}")
    return command + (f"  # give {' and '.join(missing)}" if missing else "")
