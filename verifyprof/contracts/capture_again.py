"""``verifyprof capture --again CAPTURE [options]``: a capture's own command, as its manifest
recorded it, run again with what the user changes (issue 42's one screen: the capture that
would measure a load was the whole command, hooks and result patterns included, ten rows at 80
columns, printed twice; now it is one line).

The recorded options are kept except those that say where a capture goes and which loads it
takes (:data:`LOAD_CAPTURE_OPTIONS`) and any the user gives again (theirs replace them). The
program is the recorded one, its load placeholders (``{batch}``, ``{context}``,
``{num_draft}``) kept where the user sweeps that axis and filled with the capture's own value
where not; a program after ``--`` replaces it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

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
# each load placeholder and the capture option that sweeps it
SWEPT_BY = {"batch": "--batches", "context": "--contexts", "num_draft": "--num-drafts"}


def capture_manifest(path: Path) -> tuple[Path, dict]:
    """The manifest ``--again`` repeats: ``path/manifest.json``, a manifest named directly, or
    (a ``capture --batches`` folder) its first capture's that recorded a command."""
    path = user_path(path, AGAIN)
    if path.is_file():
        found = [path]
    else:
        found = [path / "manifest.json"] if (path / "manifest.json").is_file() else []
        found += sorted(path.glob("*/manifest.json"))
    for manifest in found:
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise VerifyprofError(f"not a readable capture manifest: {err}", manifest) from None
        if isinstance(data, dict) and _recorded(data) is not None:
            return manifest, data
    raise VerifyprofError(
        f"{AGAIN}: no capture manifest with a recorded capture command here (a folder written by"
        " verifyprof capture, or its manifest.json)",
        path,
    )


def again_argv(path: Path, given: list[str], takes_value: Callable[[str], bool]) -> list[str]:
    """``capture``'s arguments for ``capture --again path *given``: the recorded command with the
    user's options in place of the same ones, and its program's unswept placeholders filled.
    ``takes_value(name)`` says whether a capture option takes a value."""
    manifest, data = capture_manifest(path)
    options, program = _recorded(data)
    cut = given.index("--") if "--" in given else len(given)
    mine, own_program = given[:cut], given[cut + 1 :]
    named = {_name(a) for a in _option_words(mine, takes_value)}
    kept = [
        word
        for option in _options(options, takes_value)
        if _name(option[0]) not in {*LOAD_CAPTURE_OPTIONS, *named}
        for word in option
    ]
    filled = _filler(data, named, manifest)
    program = own_program or [filled(a) for a in program]
    return [*(filled(a) for a in kept), *mine, "--", *program]


def _recorded(data: dict) -> tuple[list[str], list[str]] | None:
    """The recorded capture's options and program (``command.verifyprof``), or None."""
    command = data.get("command")
    argv = command.get("verifyprof") if isinstance(command, dict) else None
    if not isinstance(argv, list) or "capture" not in argv or "--" not in argv:
        return None
    argv = [str(a) for a in argv]
    tail = argv[argv.index("capture") + 1 :]
    cut = tail.index("--")
    return tail[:cut], tail[cut + 1 :]


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


def _option_words(words: list[str], takes_value: Callable[[str], bool]) -> list[str]:
    return [o[0] for o in _options(words, takes_value) if o[0].startswith("-")]


def _name(word: str) -> str:
    return word.split("=", 1)[0]


def _filler(data: dict, named: set[str], manifest: Path) -> Callable[[str], str]:
    """Fills each placeholder the user does not sweep with the capture's own recorded value."""
    load = data.get("load") if isinstance(data.get("load"), dict) else {}
    axes = load.get("axes") if isinstance(load.get("axes"), dict) else {}

    def fill(word: str) -> str:
        for axis, option in SWEPT_BY.items():
            placeholder = "{" + axis + "}"
            if placeholder not in word or option in named:
                continue
            entry = axes.get(axis)
            value = entry.get("value") if isinstance(entry, dict) else None
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise VerifyprofError(
                    f"{AGAIN}: the recorded command holds {placeholder} and the capture recorded"
                    f" no {axis}: give {option}",
                    manifest,
                )
            word = word.replace(placeholder, f"{value:g}")
        return word

    return fill
