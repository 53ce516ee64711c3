"""Hook presets (TOML files in ``verifyprof/data/hooks/``) and user hook specs, parsed and
validated.

A preset is a list of ``[[hook]]`` entries. Each entry is one bracket (a phase, an optional
predicate and attribute extractor named from :mod:`verifyprof.capture.hooks.extractors`) and lists
its
``targets``: the functions across versions and algorithms that implement it, each with optional
``since``/``until`` versions of the preset's ``package`` (``until`` exclusive) and ``bindings``
(modules holding a ``from X import name`` copy of a module-level function). At run time every
target is feature-detected (names absent from the installed version are skipped silently);
the versions are claims checked by the tests against the packages' real source.

The hooks spec (``VERIFYPROF_HOOKS``, ``--hook``) is a comma-separated list of preset names,
preset file paths, and user targets ``module:qualname=phase``, optionally tagged:
``module:qualname=phase;key=EXPR;...;when=EXPR`` (attributes and a condition over the call's
arguments, see :mod:`~verifyprof.capture.hooks.expressions`). Commas and semicolons inside
brackets or quotes do not split.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from verifyprof.capture.hooks import expressions
from verifyprof.capture.hooks.extractors import EXTRACTORS, PREDICATES
from verifyprof.capture.hooks.lookup import Target
from verifyprof.contracts import datafiles
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.plumbing.inputs import TOML_LIMIT, read_text
from verifyprof.contracts.ranges import BY_PHASE, PHASE_RANGES

PRESETS = "hooks"  # the data-file kind: verifyprof/data/hooks/NAME.toml, or the user's (datafiles)
MODES = ("call", "self_forward")


@dataclass(frozen=True)
class Binding:
    module: str
    since: str | None = None
    until: str | None = None


@dataclass(frozen=True)
class Alternative:
    target: Target
    since: str | None = None
    until: str | None = None
    bindings: tuple[Binding, ...] = ()


@dataclass(frozen=True)
class HookEntry:
    range_name: str  # verifyprof.verify, ...
    alternatives: tuple[Alternative, ...]
    when: str | None = None  # a name in extractors.PREDICATES, or a condition expression
    attrs: str | None = None  # a name in extractors.EXTRACTORS
    mode: str = "call"
    source: str = ""  # "sglang.toml hook 3", "user hook mymod:f=verify"
    user: bool = False  # named explicitly by the user: warn when missing
    tags: tuple[
        tuple[str, str], ...
    ] = ()  # (attribute, expression): range attributes from the arguments

    @property
    def phase(self) -> str:
        return self.range_name.removeprefix("verifyprof.")


@dataclass(frozen=True)
class Preset:
    name: str
    package: str | None
    description: str
    entries: tuple[HookEntry, ...]
    path: Path


def phase_range(phase: str) -> str:
    """``verify`` or ``verifyprof.verify`` -> ``verifyprof.verify``; ValueError for anything
    else."""
    if phase in PHASE_RANGES:
        return phase
    if phase in BY_PHASE:
        return BY_PHASE[phase]
    raise ValueError(f"unknown phase {phase!r} (phases: {', '.join(BY_PHASE)})")


def builtin_presets() -> list[str]:
    return sorted(p.stem for p in (datafiles.BUILTIN / PRESETS).glob("*.toml"))


def load_preset(name_or_path: str | Path) -> Preset:
    """A preset by name (``sglang``: the user's ``hooks/sglang.toml`` in the data directory, else
    the built-in one) or a preset file; VerifyprofError naming the problem."""
    path = Path(name_or_path)
    if not (path.suffix == ".toml" or len(path.parts) > 1):
        try:
            found = datafiles.locate(Path(PRESETS) / f"{name_or_path}.toml")
        except OSError:  # no file can have such a name (too long for the file system, ...)
            found = None
        if found is None:
            raise VerifyprofError(
                f"unknown hook preset {_shown(str(name_or_path))!r} (known:"
                f" {', '.join(datafiles.names(PRESETS))}; user presets go in"
                f" {datafiles.user_dir() / PRESETS})"
            )
        path = found
    try:
        data = tomllib.loads(  # a regular file, size-checked, UTF-8
            read_text(path, "hook preset", TOML_LIMIT, missing="hook preset file not found")
        )
    except FileNotFoundError:
        raise VerifyprofError("hook preset file not found", path) from None
    except OSError as exc:
        raise VerifyprofError(
            f"cannot read hook preset file: {exc.strerror or exc}", path
        ) from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise VerifyprofError(f"not a valid hook preset (TOML): {exc}", path) from None
    try:
        return _preset(data, path)
    except (ValueError, TypeError, KeyError) as exc:
        raise VerifyprofError(f"bad hook preset: {exc}", path) from None


def _shown(name: str, width: int = 60) -> str:
    """A name as an error quotes it: a 300-character one cut in the middle."""
    return name if len(name) <= width else f"{name[: width - 20]}…{name[-19:]}"


def _preset(data: dict, path: Path) -> Preset:
    hooks = data.get("hook")
    if not isinstance(hooks, list) or not hooks:
        raise ValueError("no [[hook]] entries")
    entries = tuple(_entry(hook, f"{path.name} hook {i + 1}") for i, hook in enumerate(hooks))
    return Preset(
        str(data.get("name", path.stem)),
        data.get("package"),
        str(data.get("description", "")),
        entries,
        path,
    )


def _entry(hook: dict, where: str) -> HookEntry:
    try:
        range_name = phase_range(str(hook["phase"]))
    except KeyError:
        raise ValueError(f"{where}: no phase") from None
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    when, attrs, mode = hook.get("when"), hook.get("attrs"), hook.get("mode", "call")
    tags: tuple[tuple[str, str], ...] = ()
    if isinstance(attrs, dict):  # attrs = {tokens = "arg0.shape[-1]"}: expressions
        tags, attrs = _tags(attrs.items(), where), None
    if when is not None:
        _check_when(str(when), where)
    if attrs is not None and attrs not in EXTRACTORS:
        raise ValueError(
            f"{where}: unknown attrs extractor {attrs!r} (known: {', '.join(sorted(EXTRACTORS))})"
        )
    if mode not in MODES:
        raise ValueError(f"{where}: mode must be one of {', '.join(MODES)}, not {mode!r}")
    targets = hook.get("targets")
    if not isinstance(targets, list) or not targets:
        raise ValueError(f"{where}: no targets")
    alternatives = []
    for item in targets:
        item = {"target": item} if isinstance(item, str) else item
        try:
            target = Target.parse(item["target"])
        except KeyError:
            raise ValueError(f"{where}: a target without 'target'") from None
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        bindings = tuple(
            (
                Binding(b)
                if isinstance(b, str)
                else Binding(b["module"], b.get("since"), b.get("until"))
            )
            for b in item.get("bindings", ())
        )
        alternatives.append(Alternative(target, item.get("since"), item.get("until"), bindings))
    return HookEntry(range_name, tuple(alternatives), when, attrs, mode, where, tags=tags)


_KEY = re.compile(r"^[A-Za-z_]\w*$")


def _check_when(when: str, where: str) -> None:
    if when in PREDICATES:
        return
    prefix = f"{where}: " if where else ""
    try:
        expressions.condition(when)
    except expressions.ExpressionError as exc:
        if _KEY.match(when.strip()):
            raise ValueError(
                f"{prefix}unknown predicate {when!r} (known: {', '.join(sorted(PREDICATES))}; "
                "or a condition such as arg0.shape[-1] > 1)"
            ) from None
        raise ValueError(f"{prefix}when: {exc}") from None


def _tags(items, where: str) -> tuple[tuple[str, str], ...]:
    tags = []
    for key, text in items:
        if not _KEY.match(str(key)):
            raise ValueError(f"{where}: attribute name {key!r} is not an identifier")
        try:
            expressions.value(str(text))
        except expressions.ExpressionError as exc:
            raise ValueError(f"{where}: {key}: {exc}") from None
        tags.append((str(key), str(text)))
    return tuple(tags)


def parse_user_hook(spec: str) -> HookEntry:
    """``module:qualname=phase[;key=EXPR...][;when=EXPR]`` -> a hook entry; VerifyprofError with
    one clear line otherwise. ``when`` may also name a predicate, ``attrs=NAME`` an extractor."""
    text = spec.strip()
    head, *fields = split_top_level(text, ";")
    target_text, sep, phase = head.rpartition("=")
    if not sep or not target_text:
        raise VerifyprofError(
            f"bad hook {spec!r}: expected module:qualname=phase, e.g."
            " mypkg.model:Model.forward=verify"
        )
    when, attrs, pairs = None, None, []
    try:
        range_name = phase_range(phase.strip())
        target = Target.parse(target_text)
        for field_text in fields:
            key, eq, expression = field_text.partition("=")
            key = key.strip()
            if not eq or not expression.strip():
                raise ValueError(
                    f"{field_text!r} is not key=expression (e.g. tokens=arg0.shape[-1])"
                )
            if key == "when":
                _check_when(expression.strip(), "")
                when = expression.strip()
            elif key == "attrs":
                if expression.strip() not in EXTRACTORS:
                    raise ValueError(
                        f"unknown attrs extractor {expression.strip()!r} (known:"
                        f" {', '.join(sorted(EXTRACTORS))})"
                    )
                attrs = expression.strip()
            else:
                pairs.append((key, expression.strip()))
        tags = _tags(pairs, "attribute")
    except ValueError as exc:
        raise VerifyprofError(f"bad hook {spec!r}: {exc}") from None
    return HookEntry(
        range_name,
        (Alternative(target),),
        when,
        attrs,
        source=f"user hook {text}",
        user=True,
        tags=tags,
    )


def split_top_level(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside brackets and quotes, items stripped, empty ones dropped."""
    items, depth, quote, start = [], 0, "", 0
    for i, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
        elif char == sep and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def split_spec(spec: str) -> list[str]:
    return split_top_level(spec, ",")


def resolve_spec(spec: str) -> list[HookEntry]:
    """Every hook entry named by a hooks spec (presets expanded), in order."""
    entries: list[HookEntry] = []
    for item in split_spec(spec):
        if "=" in item or ":" in item:
            entries.append(parse_user_hook(item))
        else:
            entries.extend(load_preset(item).entries)
    return entries


# --- versions (for since/until claims; release versions like 0.5.6.post2, 5.17.0, 1.0rc1) ---

_VERSION = re.compile(r"^(\d+(?:\.\d+)*)(?:\.?(a|b|rc|dev)(\d*))?(?:\.?post(\d+))?")


def version_key(version: str) -> tuple:
    match = _VERSION.match(version.strip())
    if match is None:
        raise ValueError(f"not a version: {version!r}")
    release = tuple(int(x) for x in match.group(1).split("."))
    release += (0,) * (6 - len(release))
    pre = {"dev": 0, "a": 1, "b": 2, "rc": 3, None: 4}[match.group(2)]
    return release + (pre, int(match.group(3) or 0), int(match.group(4) or 0))


def claimed(version: str, since: str | None, until: str | None) -> bool:
    """Whether a preset claims a name exists in ``version`` (``since`` inclusive, ``until``
    exclusive)."""
    key = version_key(version)
    if since is not None and key < version_key(since):
        return False
    if until is not None and key >= version_key(until):
        return False
    return True
