"""What a capture's manifest says its program ran at (batch, context, draft count): the
program's own results first, then its command line. One reading for one capture's model and for
several captures' (``captures``)."""

from __future__ import annotations

from verifyprof.contracts.manifest import Manifest


def target_of(manifest: Manifest | None) -> list[str]:
    raw = manifest.raw if manifest is not None else {}
    command = raw.get("command") if isinstance(raw, dict) else None
    target = command.get("target") if isinstance(command, dict) else command
    return [str(a) for a in target] if isinstance(target, list) else []


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


def program_context(manifest: Manifest | None) -> float | None:
    """The context the capture's program reported or ran with (None: it does not say)."""
    target = target_of(manifest)
    return as_num(results_of(manifest).get("context")) or as_num(
        option_of(target, "--context", "--ctx")
    )
