"""What a capture's manifest says its program ran at (batch, context, draft count): the
program's own results first, then its command line. One reading for one capture's model and for
several captures' (``pooled_captures``)."""

from __future__ import annotations

from verifyprof.contracts.command_record import recorded_inputs
from verifyprof.contracts.manifest import Manifest


def target_of(manifest: Manifest | None) -> list[str]:
    raw = manifest.raw if manifest is not None else {}
    command = raw.get("command") if isinstance(raw, dict) else None
    target = command.get("target") if isinstance(command, dict) else command
    return [str(a) for a in target] if isinstance(target, list) else []


def inputs_of(manifest: Manifest | None) -> dict[int, str]:
    """The fingerprints ``capture`` took of the files its command names: argument index in
    ``target_of`` -> digest (none for captures made before it took them)."""
    return recorded_inputs(manifest.raw if manifest is not None else None)


# what a server capture's workload sets, as the capture options that set it: a server's captures
# are of one program where its command and these agree (the prompts by their contents, where
# the capture fingerprinted them; --input-len sizes each prompt: a context; --temperature changes
# what is accepted). --concurrency and --requests are its load and run length, --output-len too.
WORKLOAD_OPTIONS = (
    ("prompts", "--prompts"),
    ("input_len", "--input-len"),
    ("temperature", "--temperature"),
)


def workload_args(manifest: Manifest | None) -> tuple[list[str], dict[int, str]]:
    """A server capture's workload as capture options, to follow its server's command: (the
    arguments, their index -> the ``--prompts`` file's fingerprint); none for a program's."""
    raw = manifest.raw if manifest is not None else {}
    workload = raw.get("workload") if isinstance(raw, dict) else None
    if not isinstance(workload, dict):
        return [], {}
    args: list[str] = []
    digests: dict[int, str] = {}
    for key, option in WORKLOAD_OPTIONS:
        if workload.get(key) is None:
            continue
        value = workload[key]
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        args += [option, format(value, "g") if number else str(value)]  # 0 as 0.0
        if key == "prompts" and workload.get("prompts_digest"):
            digests[len(args) - 1] = str(workload["prompts_digest"])
    return args, digests


def results_of(manifest: Manifest | None) -> dict:
    raw = manifest.raw if manifest is not None else {}
    res = raw.get("results") if isinstance(raw, dict) else None
    return res if isinstance(res, dict) else {}


def option_of(target: list[str], *names: str) -> str | None:
    for i, arg in enumerate(target):
        for name in names:
            if arg == name and i + 1 < len(target):
                return target[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def as_int(v: object) -> int | None:
    try:
        return int(str(v)) if v is not None else None
    except ValueError:
        return None


def as_num(v: object) -> float | None:
    try:
        return float(str(v)) if v is not None else None
    except ValueError:
        return None


# ------------------------------------------------------------------------------------------
# what a capture knows of its load (the manifest's ``load`` record, issue 41)


def load_of(manifest: Manifest | None) -> dict:
    raw = manifest.raw if manifest is not None else {}
    load = raw.get("load") if isinstance(raw, dict) else None
    return load if isinstance(load, dict) else {}


def load_template(manifest: Manifest | None) -> list[str] | None:
    """The program's command before ``capture`` put its load in (None: nothing swept)."""
    template = load_of(manifest).get("template")
    return [str(a) for a in template] if isinstance(template, list) else None


def load_axis(manifest: Manifest | None, axis: str) -> tuple[float, str] | None:
    """One axis's value as the capture recorded it, and where from (``capture --contexts``'s
    template, or ``--program-context``)."""
    axes = load_of(manifest).get("axes")
    entry = axes.get(axis) if isinstance(axes, dict) else None
    value = as_num(entry.get("value")) if isinstance(entry, dict) else None
    if value is None:
        return None
    if entry.get("source") == "declared":
        return value, "capture --program-context"
    return value, f"capture's {entry.get('placeholder') or axis} value"


CONTEXT_OPTIONS = ("--context", "--ctx")  # the context options read by name (a convenience)
# the batch options any program may spell so, read by name (a convenience, never the only way)
BATCH_OPTIONS = ("--batch", "--batch-size", "--bs", "--concurrency")


def stated_context(
    manifest: Manifest | None,
    tagged: float | None,
    label: str,
    load_options: tuple[tuple[str, str], ...] = (),
    declared: tuple[tuple[str | None, float], ...] = (),
) -> tuple[float | None, str]:
    """The context a capture's program ran at and who says so, in this order: its results, the
    trace's ``ctx=`` tags (``tagged``), the capture's load record (``{context}``,
    ``--program-context``), its command's context option (one ``--load-option NAME=context``
    names, or ``--context``/``--ctx``), the user's ``--capture-context`` (for its ``label``,
    then for every capture); (None, how to state it) where none says. Never a default, nor the load
    curve's ``--context``."""
    value = as_num(results_of(manifest).get("context"))
    if value:
        return value, "its results"
    if tagged:
        return tagged, "the trace's ctx= tags"
    found = load_axis(manifest, "context")
    if found is not None:
        return found
    target = target_of(manifest) + workload_args(manifest)[0]  # a server's workload too
    names = [n for n, axis in load_options if axis == "context"] + list(CONTEXT_OPTIONS)
    for name in names:
        value = as_num(option_of(target, name))
        if value:
            return value, f"its command's {name}"
    given = dict(declared)
    for key in (label, None):
        if key in given:
            return given[key], "whatif --capture-context"
    return None, "nothing states it: whatif --capture-context"
