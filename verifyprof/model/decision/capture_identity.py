"""Whether several captures are of one program (issue 41): their commands compared argument by
argument, the program's identity being its command with its load masked (a server's capture:
its server's command, then the capture options of the workload that drove it).

An argument is load, not identity, where the capture itself says so (its ``load`` record's
template put a ``{batch}``, ``{num_draft}`` or ``{context}`` there), where the evidence of both
captures confirms its values as a load (the trace's ``bs=`` tags a batch, the verify's width
k + 1 a draft count, the program's results a batch, draft count or context), where the user
declared it (``whatif --load-option NAME=AXIS``; ``NAME=none``: not load, but captures may differ
in it, as in an input file's path), or where its name is one of a few well-known
load and bookkeeping options (:data:`LOAD_OPTIONS`, a convenience). Any other difference is
refused in one line naming both captures, the options and how to declare them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.manifest import Manifest
from verifyprof.model.decision.capture_facts import (
    BATCH_OPTIONS,
    CONTEXT_OPTIONS,
    as_int,
    as_num,
    inputs_of,
    load_template,
    results_of,
    target_of,
    workload_args,
)

# a program's options that set its load, or only name its outputs, run length or address:
# captures may differ in these without the evidence (a convenience, not the only way in: see the
# module)
LOAD_OPTIONS = frozenset(
    {
        "--batch",
        "--batch-size",
        "--bs",
        "--context",
        "--ctx",
        "--num-draft",
        "--num-draft-tokens",
        "--speculative-num-steps",
        "--speculative-num-draft-tokens",
        "--steps",
        "--warmup",
        "--rounds",
        "--out",
        "--output",
        "--seed",
        "--sweep-widths",
        "--sweep-steps",
        "--concurrency",
        "--requests",
    }
)
ADDRESS_OPTIONS = frozenset({"--port", "--host"})  # where a server listens: servers' captures
NOT_LOAD = "none"  # a declared option captures may differ in that sets no load (a path)
PLACEHOLDERS = {"{batch}": "batch", "{num_draft}": "num_draft", "{context}": "context"}
AXIS_WORDS = {"batch": "batch", "num_draft": "draft count", "context": "context"}


@dataclass(frozen=True)
class Command:
    """One capture's command as compared: the program's name, its arguments after it, which of
    them its own template names as load, and the load values its trace and results confirm."""

    label: str
    program: str
    args: tuple[str, ...]
    templated: dict[int, str] = field(default_factory=dict)  # argument index -> axis
    evidence: dict[str, frozenset[int]] = field(default_factory=dict)  # axis -> values
    digests: dict[int, str] = field(default_factory=dict)  # argument index -> file fingerprint
    server: bool = False  # a server's capture (a workload drove it)


def program_index(target: list[str]) -> int:
    """Where the program starts in a command (after its interpreter and the interpreter's
    options): the first ``.py`` file, the module of ``-m``, else the first word that is neither
    an option nor an interpreter."""
    for i, arg in enumerate(target):
        if arg.endswith(".py"):
            return i
    for i, arg in enumerate(target[:-1]):
        if arg == "-m":
            return i + 1
    for i, arg in enumerate(target):
        if not arg.startswith("-") and not Path(arg).name.startswith("python"):
            return i
    return len(target)


def command_of(label: str, manifest: Manifest | None, batch: int | None, width: int | None):
    """``label``'s command (``batch``: its trace's ``bs=`` tag; ``width``: its verify's)."""
    target = target_of(manifest)
    at = program_index(target)
    program = Path(target[at]).name if at < len(target) else ""
    args = tuple(target[at + 1 :])
    template = load_template(manifest)
    templated = {}
    if template is not None and len(template) == len(target):
        for i, arg in enumerate(template[at + 1 :]):
            axis = next((a for p, a in PLACEHOLDERS.items() if p in arg), None)
            if axis is not None:
                templated[i] = axis
    res = results_of(manifest)
    evidence = {
        "batch": {batch, as_int(res.get("batch"))},
        "num_draft": {(width - 1) if width else None, as_int(res.get("num_draft"))},
        "context": {as_int(res.get("context"))},
    }
    clean = {
        axis: frozenset(v for v in values if v is not None) for axis, values in evidence.items()
    }
    digests = {i - at - 1: d for i, d in inputs_of(manifest).items() if i > at}
    workload, fingerprints = workload_args(manifest)  # a server's: after its command
    digests |= {len(args) + i: d for i, d in fingerprints.items()}
    return Command(
        label, program, args + tuple(workload), templated, clean, digests, bool(workload)
    )


@dataclass(frozen=True)
class Item:
    """One argument of a command as compared: an option and its value (``--bs 8``, ``--bs=8``),
    a flag (no value) or a positional argument (no name); ``axis``: the load axis the capture's
    template put in it."""

    name: str | None
    value: str | None
    axis: str | None = None
    digest: str | None = None  # the fingerprint of the file the value names, where taken

    @property
    def key(self) -> str:
        return self.name or f"argument {self.value!r}"

    def text(self) -> str:
        return " ".join(x for x in (self.name, self.value) if x is not None)


def items(command: Command) -> list[Item]:
    """A command's arguments as options with their values, flags and positionals."""
    args, out, i = command.args, [], 0
    digest = command.digests.get
    while i < len(args):
        arg, axis = args[i], command.templated.get(i)
        if _is_option(arg) and "=" in arg:
            name, _, value = arg.partition("=")
            out.append(Item(name, value, axis, digest(i)))
        elif _is_option(arg) and i + 1 < len(args) and not _is_option(args[i + 1]):
            out.append(Item(arg, args[i + 1], command.templated.get(i + 1), digest(i + 1)))
            i += 1
        elif _is_option(arg):
            out.append(Item(arg, None))
        else:
            out.append(Item(None, arg, axis, digest(i)))
        i += 1
    return out


def load_differences(
    first: Command,
    other: Command,
    declared: tuple[tuple[str, str], ...] = (),
    same_files: list[str] | None = None,
) -> dict[str, str | None]:
    """The options in which ``other`` differs from ``first`` as load (option -> axis, None for a
    bookkeeping option); a difference nothing explains is refused, naming both captures.
    ``same_files`` collects the arguments whose paths differ and whose files hash alike whole
    (the join took them as one input: the notes say so)."""
    if other.program != first.program:
        raise VerifyprofError(
            f"not a capture of the same program as {first.label}: {other.program or '(none)'}"
            f" against {first.program or '(none)'}",
            other.label,
        )
    names = dict(declared)
    _refuse_none_on_load(names)
    found: dict[str, str | None] = {}
    listed = (items(first), items(other))
    in_both = {x.name for x in listed[0]} & {x.name for x in listed[1]}
    kept = []
    for command_items in listed:  # declared and well-known load options: set aside
        mine = []
        for item in command_items:
            axis = names.get(item.name) if item.name else None
            if axis == NOT_LOAD and item.name in in_both:  # a path to one input in both
                found[item.name] = None
            elif axis is not None and axis != NOT_LOAD:
                found[item.name] = axis
            elif item.name in LOAD_OPTIONS:
                found[item.name] = _named_axis(item.name)
            elif item.name in ADDRESS_OPTIONS & in_both and first.server and other.server:
                found[item.name] = None  # one server's captures, each on a port of its own
            else:
                mine.append(item)
        kept.append(mine)
    _refuse_other_files(first, other, listed, names)
    a_items, b_items = kept
    if [x.name for x in a_items] != [x.name for x in b_items]:
        only = [x.text() for x in b_items if x.name not in {y.name for y in a_items}]
        gone = [x.text() for x in a_items if x.name not in {y.name for y in b_items}]
        raise VerifyprofError(
            f"not a capture of the same program settings as {first.label}:"
            f" {' '.join(only) or '(none)'} against {' '.join(gone) or '(none)'}"
            if only or gone
            else f"not a capture of the same program settings as {first.label}: its"
            f" arguments {' '.join(other.args)} against {' '.join(first.args)}",
            other.label,
        )
    unexplained: list[tuple[str | None, str, str, str]] = []  # name, values, a note
    for a, b in zip(a_items, b_items):
        if a.value == b.value and not _other_contents(a.digest, b.digest):
            continue  # one path: one input, unless its file changed between the captures
        if _same_file(a.digest, b.digest):  # two paths to files of the same content
            if same_files is not None:
                same_files.append(a.key)
            continue
        axis = a.axis or b.axis or _confirmed(first, other, a.value or "", b.value or "")
        if axis is None:
            note = " (the files' contents differ)" if _other_contents(a.digest, b.digest) else ""
            unexplained.append((a.name, a.value or "", b.value or "", note))
        else:
            found[a.key] = axis
    if unexplained:
        raise VerifyprofError(_refusal(first.label, other.label, unexplained), None)
    return found


def _other_contents(a: str | None, b: str | None) -> bool:
    """Two fingerprints that differ: the files' contents differ (one content gives one size,
    so one kind of fingerprint and one value; equal ends, by contrast, prove nothing). Also
    under one path: a file edited between two captures, or one relative name from two
    folders."""
    return a is not None and b is not None and a != b


def _same_file(a: str | None, b: str | None) -> bool:
    """Two fingerprints of one content: whole-file hashes only (a large file's size and ends
    can match where its middle differs: two fine-tunes of one model)."""
    return a is not None and a == b and a.startswith("sha256:")


def _refuse_none_on_load(names: dict[str, str]) -> None:
    """``--load-option NAME=none`` on an option known to set a load is refused: it would set
    the option aside here and still be read as that load elsewhere."""
    for name, axis in names.items():
        known = _named_axis(name) if name in LOAD_OPTIONS else None
        if axis == NOT_LOAD and known is not None:
            raise VerifyprofError(
                f"--load-option {name}=none: {name} sets the {AXIS_WORDS[known]}; declare it"
                f" {name}={known} or leave it out"
            )


def _refuse_other_files(first: Command, other: Command, listed, names: dict[str, str]) -> None:
    """An option declared ``none`` whose files both captures fingerprinted differently names
    two inputs, not two paths to one: refused, naming both."""
    a_items, b_items = ({x.name: x for x in found if x.name} for found in listed)
    for name, axis in names.items():
        a, b = a_items.get(name), b_items.get(name)
        if axis == NOT_LOAD and a and b and a.digest and b.digest and a.digest != b.digest:
            raise VerifyprofError(
                f"{other.label} is not a capture of the same program as {first.label}: {name}"
                f" {b.value} against {a.value} is declared none (a path to the same input), but"
                " the files' contents differ",
                None,
            )


def _is_option(arg: str) -> bool:
    """``--bs``, ``--bs=8`` (argparse's other spelling), ``-b``; not a negative number."""
    return arg.startswith("-") and as_num(arg) is None


def _confirmed(first: Command, other: Command, va: str, vb: str) -> str | None:
    """The axis whose values both captures' evidence confirms ``va`` and ``vb`` to be."""
    a, b = as_int(va), as_int(vb)
    if a is None or b is None:
        return None
    for axis in ("batch", "num_draft", "context"):
        if a in first.evidence.get(axis, ()) and b in other.evidence.get(axis, ()):
            return axis
    return None


def _named_axis(name: str) -> str | None:
    if name in BATCH_OPTIONS:
        return "batch"
    if name in CONTEXT_OPTIONS:
        return "context"
    if "draft" in name or name == "--speculative-num-steps":
        return "num_draft"
    return None


def _refusal(first: str, other: str, diffs: list[tuple[str | None, str, str, str]]) -> str:
    """One line: both captures, the options they differ in and how to declare them."""
    shown = ", ".join(
        (f"{name} {vb} against {va}" if name else f"argument {vb!r} against {va!r}") + note
        for name, va, vb, note in diffs
    )
    named = [name for name, *_ in diffs if name]
    how = " --load-option ".join(f"{n}=AXIS" for n in dict.fromkeys(named)) if named else ""
    paths = (
        "" if any(note for *_, note in diffs) else "; none where it only names a path to one input"
    )
    declare = (
        f"; declare {'them' if len(named) > 1 else 'it'}: whatif --load-option {how}"
        f" (AXIS: batch, num_draft or context where it sets the load{paths})"
        if named
        else "; a positional argument cannot be declared: capture them with a placeholder"
        " (capture --batches ... {batch})"
    )
    return (
        f"{other} is not a capture of the same program as {first}: {shown}, and neither trace"
        f" nor results confirm {'them' if len(diffs) > 1 else 'it'} as a batch, draft count or"
        f" context{declare}"
    )
