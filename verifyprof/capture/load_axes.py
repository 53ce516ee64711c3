"""One capture per load of a program (issue 32 item 3, issue 41): ``capture --batches 1,8
--num-drafts 1,4 --contexts 512,2048 --out DIR -- python prog.py --bs {batch} --k {num_draft}
--ctx {context}`` runs the program once per combination of the values given (the cross product),
each placeholder replaced in its command (and in ``--decode-cmd``), each capture in its own
folder of ``DIR`` (``batch-8``; ``k-4``; ``ctx-512``; several axes joined: ``batch-8_k-4``).

Each capture's manifest records what the capture knows of its load (its ``load`` record): the
command before the values were put in (``template``), and each axis's value, placeholder and the
program option the placeholder sat in. ``whatif DIR`` then reads the folder's captures as one
program's: the arguments the template names are load, never the program's identity.
``--program-context N`` states the context the program ran at, where it has no option for it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from pathlib import Path

from verifyprof.capture.request import CaptureOptions, validate
from verifyprof.capture.results import CaptureResult
from verifyprof.contracts.errors import VerifyprofError


@dataclass(frozen=True)
class Axis:
    """One load axis of a capture sweep: its name in the manifest, its capture option, the
    placeholder the program's command names and its folder's prefix."""

    name: str
    option: str
    placeholder: str
    prefix: str


AXES = (
    Axis("batch", "--batches", "{batch}", "batch"),
    Axis("num_draft", "--num-drafts", "{num_draft}", "k"),
    Axis("context", "--contexts", "{context}", "ctx"),
)
BY_NAME = {a.name: a for a in AXES}
FOLDER_PREFIXES = {a.prefix: a.name for a in AXES}


def parse_values(text: str, option: str) -> tuple[int, ...]:
    """``1,8,32`` -> (1, 8, 32): distinct, positive, in the order given."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise VerifyprofError(
            f"{option}: a comma-separated list of whole numbers, got {text!r:.60}"
        ) from None
    if any(v < 1 for v in values) or len(set(values)) != len(values):
        raise VerifyprofError(f"{option} {text}: distinct values of 1 or more")
    return values


def parse_batches(text: str) -> tuple[int, ...]:
    return parse_values(text, "--batches")


def option_at(argv: list[str], placeholder: str) -> str | None:
    """The program option a placeholder sits in (``--bs {batch}`` or ``--bs={batch}``); None
    where it sits elsewhere (a positional argument, inside a longer word)."""
    for i, arg in enumerate(argv):
        if placeholder not in arg:
            continue
        name, eq, value = arg.partition("=")
        if eq and value == placeholder and name.startswith("-"):
            return name
        if arg == placeholder and i > 0 and argv[i - 1].startswith("-"):
            return argv[i - 1].split("=", 1)[0]
        return None
    return None


def load_record(opts: CaptureOptions, values: dict[str, int], context: int | None) -> dict | None:
    """What one capture knows of its load (the manifest's ``load``): None where it knows
    nothing (no axis swept, no ``--program-context``)."""
    if not values and context is None:
        return None
    axes = {
        name: {
            "value": v,
            "placeholder": BY_NAME[name].placeholder,
            "option": option_at(opts.program, BY_NAME[name].placeholder),
            "source": "template",
        }
        for name, v in values.items()
    }
    if context is not None:
        axes["context"] = {"value": context, "placeholder": None, "option": None}
        axes["context"]["source"] = "declared"
    return {
        "template": list(opts.program) if values else None,
        "decode_template": opts.decode_cmd if values else None,
        "axes": axes,
    }


def folder_name(values: dict[str, int]) -> str:
    return "_".join(f"{BY_NAME[n].prefix}-{v}" for n, v in values.items())


def _substitute(text: str, values: dict[str, int]) -> str:
    for name, v in values.items():
        text = text.replace(BY_NAME[name].placeholder, str(v))
    return text


def per_load(
    opts: CaptureOptions, sweep: dict[str, tuple[int, ...]], context: int | None = None
) -> list[CaptureOptions]:
    """The options of each load's capture (``sweep``: axis name -> values), the cross product in
    the order batch, draft count, context; the program must name each swept axis's placeholder,
    and name none of an axis not swept."""
    given = ", ".join(BY_NAME[n].option for n in sweep)
    if opts.mode != "program":
        raise VerifyprofError(
            f"{given}: for a program (after --); a server's load is --concurrency"
        )
    for axis in AXES:
        named = any(axis.placeholder in arg for arg in opts.program)
        if axis.name in sweep and not named:
            raise VerifyprofError(
                f"{axis.option}: the program's command names no {axis.placeholder} to replace"
                f" (e.g. -- python prog.py --{axis.prefix} {axis.placeholder})"
            )
        if axis.name not in sweep and named:
            raise VerifyprofError(
                f"the program's command names {axis.placeholder}: give {axis.option} (its"
                " values), or write the value itself"
            )
    if context is not None and "context" in sweep:
        raise VerifyprofError(
            "--program-context states one context for a capture; --contexts sweeps them: give one"
        )
    if opts.out.exists():
        raise VerifyprofError(f"{opts.out}: --out must be a new folder (it holds one per load)")
    names = [a.name for a in AXES if a.name in sweep]
    out = []
    for combo in itertools.product(*(sweep[n] for n in names)):
        values = dict(zip(names, combo))
        out.append(
            replace(
                opts,
                out=opts.out / folder_name(values),
                program=[_substitute(arg, values) for arg in opts.program],
                decode_cmd=_substitute(opts.decode_cmd, values) if opts.decode_cmd else None,
                load=load_record(opts, values, context),
            )
        )
    return out


def per_batch(opts: CaptureOptions, batches: tuple[int, ...]) -> list[CaptureOptions]:
    return per_load(opts, {"batch": batches})


def capture_loads(
    opts: CaptureOptions,
    sweep: dict[str, tuple[int, ...]],
    run_one,
    context: int | None = None,
    on_done=None,
    on_stop=None,
) -> list[CaptureResult]:
    """Each load's capture in turn (``run_one``: the one-capture flow, ``on_done`` told of each
    that finished); every load's options checked before the first starts; the first failure
    stops the rest, what was captured kept, ``on_stop`` told which finished. ``--out`` is made
    by the first capture, after its own checks (nsys found, ...): a refused run leaves no empty
    folder that a retry would call taken."""
    each = per_load(opts, sweep, context)
    for o in each:
        validate(o)
    done: list[CaptureResult] = []
    try:
        for o in each:
            done.append(run_one(o))
            if on_done is not None:
                on_done(done[-1])
    except BaseException:
        if done and on_stop is not None:
            names = ", ".join(o.out.name for o in each[: len(done)])
            on_stop(
                f"stopped after {len(done)} of {len(each)} captures: {names} finished, kept in"
                f" {opts.out}"
            )
        raise
    return done


def capture_batches(opts: CaptureOptions, batches: tuple[int, ...], run_one) -> list[CaptureResult]:
    return capture_loads(opts, {"batch": batches}, run_one)


def folder_load(name: str) -> dict[str, int] | None:
    """``batch-8_k-4`` -> {"batch": 8, "num_draft": 4}; None for a name no sweep writes."""
    out: dict[str, int] = {}
    for part in name.split("_"):
        prefix, _, value = part.partition("-")
        axis = FOLDER_PREFIXES.get(prefix)
        if axis is None or axis in out or not value.isdigit():
            return None
        out[axis] = int(value)
    return out or None


def capture_folders(folder: Path) -> list[Path] | None:
    """A sweep's output (``DIR/batch-N``, ``DIR/k-N``, ``DIR/ctx-N`` or their joins, each a
    capture folder), smallest load first (batch, then draft count, then context); None when
    ``folder`` is not one."""
    if not folder.is_dir() or (folder / "manifest.json").exists():
        return None
    found = []
    for child in folder.iterdir():
        load = folder_load(child.name)
        if load is not None and (child / "manifest.json").is_file():
            key = tuple(load.get(a.name, 0) for a in AXES)
            found.append((key, child.name, child))
    return [p for *_, p in sorted(found)] or None
