"""``verifyprof capture --again CAPTURE [options]``: a capture's own command, as its manifest
recorded it, run again with what the user changes (issue 42's one screen: the capture that
would measure a load was the whole command, hooks and result patterns included, ten rows at 80
columns, printed twice; now it is one line).

The recorded options are kept except those that say where a capture goes and which loads it
takes (:data:`LOAD_CAPTURE_OPTIONS`; ``--program-context`` stays unless ``--contexts`` or
another ``--program-context`` is given) and any the user gives again (theirs replace them).
The program is the recorded one, its load placeholders (``{batch}``, ``{context}``,
``{num_draft}``) kept: an axis the user does not sweep is swept at the capture's own value
(``--batches 8``), so the new capture records its load as the first did; a program after ``--``
replaces the recorded one."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

from verifyprof.contracts.command_record import argument_value, recorded_inputs
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.plumbing.paths import user_path

AGAIN = "--again"
# capture's options that say where the capture goes and which loads it takes (name -> whether
# it takes a value): never carried over from the recorded command
LOAD_CAPTURE_OPTIONS = {
    "--out": True,
    "-o": True,
    "--batches": True,
    "--num-drafts": True,
    "--contexts": True,
    "--concurrency": True,
    "--program-context": True,
}
# each load placeholder's axis and the capture option that sweeps it
SWEPT_BY = {"batch": "--batches", "num_draft": "--num-drafts", "context": "--contexts"}


def capture_manifest(path: Path) -> tuple[Path, dict]:
    """The manifest ``--again`` repeats: ``path/manifest.json``, or a manifest named directly (a
    ``capture --batches`` folder is its smallest load's capture folder by then: cli/again.py)."""
    path = user_path(path, AGAIN)
    manifest = path if path.is_file() else path / "manifest.json"
    data = None
    if manifest.is_file():
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise VerifyprofError(f"not a readable capture manifest: {err}", manifest) from None
    if not isinstance(data, dict) or _recorded(data) is None:
        raise VerifyprofError(
            f"{AGAIN}: no capture manifest with a recorded capture command here (a folder"
            " written by verifyprof capture, or its manifest.json)",
            path,
        )
    return manifest, data


def again_argv(path: Path, given: list[str], takes_value: Callable[[str], bool]) -> list[str]:
    """``capture``'s arguments for ``capture --again path *given``: the recorded command with the
    user's options in place of the same ones, each load placeholder the user does not sweep
    swept at the capture's own value. ``takes_value(name)`` says whether an option takes one."""
    manifest, data = capture_manifest(path)
    options, program = _recorded(data)
    cut = given.index("--") if "--" in given else len(given)
    mine, own_program = given[:cut], given[cut + 1 :]
    stray = [o[0] for o in _options(mine, takes_value) if not o[0].startswith("-")]
    if stray:
        raise VerifyprofError(
            f"{AGAIN}: {stray[0]!r} is not an option: a program to run instead of the recorded"
            " one goes after --"
        )
    named = {_name(o[0]) for o in _options(mine, takes_value)}
    dropped = {*LOAD_CAPTURE_OPTIONS, *named} - {"--program-context"}
    if named & {"--contexts", "--program-context"}:
        dropped.add("--program-context")
    kept = [
        word
        for option in _options(options, takes_value)
        if _name(option[0]) not in dropped
        for word in option
    ]
    if not own_program:
        _check_cwd(data, program, manifest)
    program = own_program or program
    return [*kept, *_own_loads(data, [*kept, *program], named, manifest), *mine, "--", *program]


def _check_cwd(data: dict, program: list[str], manifest: Path) -> None:
    """The recorded program runs from here as it ran there: refused, naming the directory, where
    a relative path that named a file when it ran (``command.inputs``: ``generate.py``,
    ``--prompts p.jsonl``) names one there and nothing here. Outputs the run made are not inputs."""
    command = data.get("command")
    cwd = command.get("cwd") if isinstance(command, dict) else None
    inputs = recorded_inputs(data)
    if not isinstance(cwd, str) or not cwd or not inputs:
        return
    if Path(cwd).resolve() == Path.cwd().resolve():
        return
    for at in inputs:
        value = argument_value(program[at]) if 0 <= at < len(program) else ""
        if not value or Path(value).is_absolute():
            continue
        try:
            there, here = (Path(cwd) / value).is_file(), Path(value).exists()
        except (OSError, ValueError):
            continue
        if there and not here:
            raise VerifyprofError(
                f"{AGAIN}: {value} names a file in {cwd}, where the capture ran its program,"
                f" and nothing here: run this from there (cd {cwd}), or give the program after --",
                manifest,
            )


def number_word(value: float) -> str:
    """A load value as capture writes it: an integer without a decimal point (1048576, not
    1.04858e+06), else the float's shortest form."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _recorded(data: dict) -> tuple[list[str], list[str]] | None:
    """The recorded capture's options and program (``command.verifyprof``), or None."""
    command = data.get("command")
    argv = command.get("verifyprof") if isinstance(command, dict) else None
    if not isinstance(argv, list) or "capture" not in argv:
        return None
    argv = [str(a) for a in argv]
    tail = argv[argv.index("capture") + 1 :]
    if "--" not in tail:
        return None
    cut = tail.index("--")
    return tail[:cut], tail[cut + 1 :]


def _axes(data: dict) -> dict:
    load = data.get("load") if isinstance(data.get("load"), dict) else {}
    return load.get("axes") if isinstance(load.get("axes"), dict) else {}


def _value(data: dict, axis: str) -> float | None:
    entry = _axes(data).get(axis)
    value = entry.get("value") if isinstance(entry, dict) else None
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _own_loads(data: dict, words: list[str], named: set[str], manifest: Path) -> list[str]:
    """``--batches N`` (``--num-drafts``, ``--contexts``) at the capture's own value for each
    placeholder in ``words`` whose axis the user does not sweep."""
    out: list[str] = []
    for axis, option in SWEPT_BY.items():
        placeholder = "{" + axis + "}"
        if option in named or not any(placeholder in w for w in words):
            continue
        value = _value(data, axis)
        if value is None:
            raise VerifyprofError(
                f"{AGAIN}: the recorded command holds {placeholder} and the capture recorded"
                f" no {axis}: give {option}",
                manifest,
            )
        out += [option, number_word(value)]
    return out


def _options(words: list[str], takes_value: Callable[[str], bool]) -> list[list[str]]:
    """``words`` as options, each with its value where it takes one (``--x v`` or ``--x=v``)."""
    out: list[list[str]] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("-") and "=" not in word and takes_value(word) and i + 1 < len(words):
            out.append([word, words[i + 1]])
            i += 2
        else:
            out.append([word])
            i += 1
    return out


def _name(word: str) -> str:
    return word.split("=", 1)[0]
