"""A command's inputs, outputs and numbers, checked before it does any work (issue 22).

:func:`check_run` is the one call a command makes first: it builds the run's
:class:`~verifyprof.contracts.plumbing.inputs.InputRegistry` from everything the command will read
(its traces, and what a folder or glob stands for: a capture folder's trace in each of its forms and
its ``manifest.json``; breakdown JSON; ``--manifest``, ``--taxonomy``, ``--prompts``; ``--hardware``
and ``--model`` files, by path or by name), refuses a file option that names a FIFO, device, socket
or directory, checks the numeric options against their documented ranges
(:mod:`verifyprof.contracts.bounds`) and refuses any output that would land on an input, naming
both. The registry stays active, so the atomic writer asks it again when it writes."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from verifyprof.contracts import bounds, datafiles
from verifyprof.contracts.errors import TraceError, VerifyprofError
from verifyprof.contracts.manifest import MANIFEST
from verifyprof.contracts.plumbing import inputs
from verifyprof.contracts.plumbing.inputs import InputRegistry, check_file_option
from verifyprof.contracts.plumbing.outputs import check_output, is_stdout
from verifyprof.contracts.plumbing.paths import is_pattern, user_path, user_paths
from verifyprof.trace.formats import NSYS_SUFFIXES
from verifyprof.trace.path_checks import is_directory, kept_breakdown, list_directory, stat_input
from verifyprof.trace.sources import expand

TAXONOMY_FILE = "taxonomy.toml"
DATA_KINDS = {"--hardware": "hardware", "--model": "models"}  # option -> data-file kind
DEFAULT_OWNER = ""  # the command's one trace (breakdown, kernels, whatif --from, report)


def check_run(
    *,
    sources: Mapping[str, Sequence[str | Path]] | None = None,
    files: Mapping[str, str | Path | None] | None = None,
    data: Mapping[str, str | None] | None = None,
    outputs: Mapping[str, str | Path | None] | None = None,
    numbers: Mapping[str, Any] | None = None,
) -> InputRegistry:
    """Check one run before it starts; the registry of its inputs, made active.

    ``sources``: owner ("" for the command's trace, "BEFORE", "AFTER", "the --compare input") -> the
    traces, folders, globs or breakdown JSON it names. ``files``: option -> a file read whole
    (``--taxonomy`` present with None: the taxonomy in use, the user's or the built-in one).
    ``data``: ``--hardware`` / ``--model`` -> a name or TOML path. ``outputs``: option -> file
    to write. ``numbers``: option -> value (None: not given)."""
    bounds.check_options(dict(numbers or {}))
    inputs.activate(None)  # a previous run's inputs are not this one's
    _check_names(sources or {}, files or {}, data or {}, outputs or {})
    for option, out in (outputs or {}).items():  # each output before any input is read
        if out is not None and not is_stdout(out):
            check_output(out)
    registry = InputRegistry()
    for owner, specs in (sources or {}).items():
        for spec in specs:
            _add_source(registry, spec, owner)
    for option, path in (files or {}).items():
        if path is None and option == "--taxonomy":
            found = datafiles.locate(TAXONOMY_FILE)
            if found is not None:
                registry.add(found, f"the taxonomy in use, {found}")
        elif path is not None:
            check_file_option(path, option)
            registry.add(path, f"the {option} file")
    for option, spec in (data or {}).items():
        found = _data_file(option, spec)
        if found is not None:
            registry.add(found, f"the {option} file")
    for option, out in (outputs or {}).items():
        if out is not None and not is_stdout(out):  # standard output is no file
            registry.check(out, option)
    inputs.activate(registry)
    return registry


def _check_names(
    sources: Mapping[str, Sequence[str | Path]],
    files: Mapping[str, str | Path | None],
    data: Mapping[str, str | None],
    outputs: Mapping[str, str | Path | None],
) -> None:
    """Every name the user gave can be used where the command runs (:func:`user_path`: a
    relative one in a deleted working directory is one line); a ``--hardware`` / ``--model``
    name that is not a path is a name."""
    for owner, specs in sources.items():
        user_paths(specs, owner or None)
    for option, path in (*files.items(), *outputs.items()):
        user_paths([path], option)
    for option, spec in data.items():
        if spec is not None and (str(spec).endswith(".toml") or os.sep in str(spec)):
            user_path(spec, option)


def _data_file(option: str, spec: str | None) -> Path | None:
    """The TOML file ``--hardware`` / ``--model`` will read (a path is checked now; an unknown
    name is left to the lookup, which lists the known ones)."""
    if spec is None:
        return None
    text = str(spec)
    if text.endswith(".toml") or os.sep in text or os.path.lexists(text):
        check_file_option(text, option)
    try:
        return datafiles.resolve(DATA_KINDS[option], text)
    except VerifyprofError:
        return None


def _add_source(registry: InputRegistry, spec: str | Path, owner: str) -> None:
    """A trace, folder, glob or breakdown JSON and every file it stands for."""
    text = str(spec)
    mine = "the" if owner == DEFAULT_OWNER else f"{owner}'s"
    if is_pattern(text):
        try:
            matched = expand(text)
        except TraceError:  # matches nothing: the reader says so
            return
        for path in matched:
            registry.add(path, f"{mine} trace, matched by {text!r}")
        return
    if not os.path.lexists(text):  # the reader's own line, before the analysis is loaded
        stat_input(Path(text))
    if not is_directory(Path(text)):  # TraceError for a FIFO, device, socket: before any output
        registry.add(text, _file_role(Path(text), owner))
        return
    folder = Path(text)
    kept = kept_breakdown(folder)
    if kept is not None:
        registry.add(kept, f"{mine} capture folder's breakdown")
        registry.add(folder / MANIFEST, f"{mine} capture folder's manifest")
        return
    kind = "capture folder" if (folder / MANIFEST).is_file() else "folder"
    for path in expand(folder):
        registry.add(path, f"{mine} {kind}'s trace")
    for path in list_directory(folder):  # every form of its nsys capture (.sqlite, .nsys-rep)
        if path.name.endswith(NSYS_SUFFIXES) and path.is_file():
            registry.add(path, f"{mine} {kind}'s trace")
    if (folder / MANIFEST).is_file():
        registry.add(folder / MANIFEST, f"{mine} capture folder's manifest")


def _file_role(path: Path, owner: str) -> str:
    from verifyprof.pipeline import is_breakdown_json

    what = "breakdown JSON" if is_breakdown_json(path) else "trace"
    return f"the {what}" if owner == DEFAULT_OWNER else f"{owner}, a {what}"
