"""verifyprof's NVTX hooks: put calls of a host program inside verifyprof ranges without editing it.

Public API:

* ``wrap(fn, phase, when=..., attrs=...)`` / ``@hook(phase)``: a callable inside a range.
* ``patch("module:Class.method", phase, ...)``: the same, in place, now or when the module is
  imported; idempotent; a missing target warns once and is skipped.
* ``install(spec)``: presets (``sglang``, ``hf-assisted``, ``workload`` or a TOML path) and user
  targets (``module:qualname=phase``) from a spec string, by default ``$VERIFYPROF_HOOKS``.
* ``status()``: what was patched, what is pending (module not imported) and what is missing.
* ``injection_env(presets, extra_hooks)``: the environment that installs the hooks in every
  process a server spawns (sitecustomize on ``PYTHONPATH`` and SGLang's plugin entry point).

Ranges bracket whole calls from the host side, so hooking a function that launches or replays a
CUDA graph (``execute``/``replay``) covers its replayed kernels; never hook code that runs inside
graph capture (a range pushed there is recorded once at capture and never on replay).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from verifyprof.capture.hooks import expressions
from verifyprof.capture.hooks import targets as _targets
from verifyprof.capture.hooks.extractors import EXTRACTORS, PREDICATES, Call
from verifyprof.capture.hooks.lookup import Target
from verifyprof.capture.hooks.presets import (
    HookEntry,
    load_preset,
    parse_user_hook,
    phase_range,
    resolve_spec,
    split_spec,
)
from verifyprof.capture.hooks.targets import HookStatus, HookWarning
from verifyprof.capture.hooks.wrappers import Rule, active_ranges, wrap_function
from verifyprof.contracts.errors import VerifyprofError

__all__ = [
    "ENV_HOOKS",
    "ENV_REPORT",
    "Call",
    "HookStatus",
    "HookWarning",
    "hook",
    "injection_env",
    "install",
    "install_from_env",
    "patch",
    "status",
    "uninstall",
    "wrap",
    "active_ranges",
    "check",
    "cannot_hook",
    "not_installed",
]

ENV_HOOKS = (  # hooks spec; the injected sitecustomize/plugin do nothing without it
    "VERIFYPROF_HOOKS"
)
ENV_REPORT = "VERIFYPROF_HOOKS_REPORT"  # directory: each process writes hooks-<pid>.json there
INJECT_DIR = Path(__file__).resolve().parent / "inject"
SGLANG_PLUGIN_NAME = "verifyprof"  # entry-point name in the group sglang.srt.plugins

_report_at_exit: list[bool] = []
_report_argv: list[list[str]] = []

Attrs = Mapping[str, object] | Callable[[Call], Mapping[str, object]] | None


def _attrs_fn(attrs: Attrs) -> Callable[[Call], Mapping[str, object]] | None:
    if attrs is None or callable(attrs):
        return attrs
    fixed = dict(attrs)
    return lambda call: fixed


def _rule(phase: str, when: Callable[[Call], bool] | None, attrs: Attrs, label: str) -> Rule:
    try:
        return Rule(phase_range(phase), when, _attrs_fn(attrs), label=label)
    except ValueError as exc:
        raise VerifyprofError(str(exc)) from None


def wrap(
    fn: Callable,
    phase: str,
    *,
    when: Callable[[Call], bool] | None = None,
    attrs: Attrs = None,
) -> Callable:
    """``fn`` inside a range of ``phase`` (``verify`` or ``verifyprof.verify``) when ``when(call)``
    holds.

    ``attrs`` (a mapping, or a function of the :class:`Call`) become ``key=value`` in the range
    text; the NVTX payload is the range's index among this function's calls. Wrapping a wrapper
    adds a rule to it rather than nesting: ``wrap(wrap(f, "verify"), "verify") is`` the same
    wrapper.
    """
    _targets.watch_torch()
    return wrap_function(fn, _rule(phase, when, attrs, label=getattr(fn, "__qualname__", "")))


def hook(
    phase: str, *, when: Callable[[Call], bool] | None = None, attrs: Attrs = None
) -> Callable:
    """Decorator form of :func:`wrap`: ``@hook("verify")``."""
    return lambda fn: wrap(fn, phase, when=when, attrs=attrs)


def patch(
    target: str,
    phase: str,
    *,
    when: Callable[[Call], bool] | None = None,
    attrs: Attrs = None,
    bindings: Iterable[str] = (),
) -> HookStatus:
    """Hooks ``module:qualname`` in place (now, or when ``module`` is imported); warns once if
    missing."""
    try:
        parsed = Target.parse(target)
    except ValueError as exc:
        raise VerifyprofError(str(exc)) from None
    return _targets.request(
        parsed, _rule(phase, when, attrs, label=target), bindings, warn_missing=True
    )


def _entry_rule(entry: HookEntry) -> Rule:
    when = None
    if entry.when:
        when = (
            PREDICATES[entry.when].fn
            if entry.when in PREDICATES
            else expressions.condition(entry.when)
        )
    attrs = EXTRACTORS[entry.attrs].fn if entry.attrs else None
    if entry.tags:
        attrs = _merged(attrs, expressions.attributes(entry.tags))
    return Rule(entry.range_name, when, attrs, entry.mode == "self_forward", entry.source)


@functools.lru_cache(maxsize=256)
def _merged(named: Callable | None, tagged: Callable) -> Callable[[Call], Mapping[str, object]]:
    """A named extractor's attributes, then the tagged ones (which win); cached so that the same
    entry installed twice gives an equal rule."""
    if named is None:
        return tagged
    return lambda call: {**_safe(named, call), **tagged(call)}


def _safe(extract: Callable, call: Call) -> Mapping[str, object]:
    try:
        return extract(call)
    except Exception:
        return {}


def install_entries(entries: Iterable[HookEntry]) -> list[HookStatus]:
    for entry in entries:
        rule = _entry_rule(entry)
        for alt in entry.alternatives:
            _targets.request(
                alt.target, rule, [b.module for b in alt.bindings], warn_missing=entry.user
            )
    return status()


def install(spec: str | Iterable[str] | None = None) -> list[HookStatus]:
    """Installs the hooks named by ``spec`` (default ``$VERIFYPROF_HOOKS``); returns :func:`status`.

    ``spec``: ``"sglang"``, ``"sglang,workload,mymod:Cls.meth=verify"``, or a list of such items.
    Raises VerifyprofError for an unknown preset or a malformed user hook.
    """
    if spec is None:
        spec = os.environ.get(ENV_HOOKS, "")
    if not isinstance(spec, str):
        spec = ",".join(spec)
    statuses = install_entries(resolve_spec(spec))
    if os.environ.get(ENV_REPORT):
        _targets.add_listener(_write_report)
        _write_report()
        if not _report_at_exit:
            atexit.register(
                _write_report
            )  # the final calls (a killed process keeps its last report)
            _report_at_exit.append(True)
    return statuses


def install_from_env() -> list[HookStatus] | None:
    """The injected entry points' call: installs ``$VERIFYPROF_HOOKS`` if set, never raises."""
    spec = os.environ.get(ENV_HOOKS, "").strip()
    if not spec:
        return None
    try:
        return install(spec)
    except Exception as exc:  # a bad spec must not stop the server; capture validated it already
        _targets.warn(f"verifyprof: hooks not installed: {exc}")
        return None


def check(
    spec: str | Iterable[str],
    path: Iterable[str | Path] = (),
    is_main: Callable[[str], bool] | None = None,
) -> list[HookStatus]:
    """What ``spec`` would hook in this interpreter: installs it, imports every target's module
    (and so whatever those import), and reports each target's state (``verifyprof hooks check``).

    ``path``: folders the program will have first on ``sys.path`` (its script's directory, the
    current directory for ``-m``; see :mod:`~verifyprof.capture.hooks.search_path`), put in front
    for the imports as Python will. ``is_main(module)``: whether the program runs ``module`` as
    ``__main__`` (:func:`~verifyprof.capture.hooks.search_path.is_main_module`); such targets are
    reported missing, never imported. The hooks stay installed; call :func:`uninstall` to remove
    them.
    """
    install(spec)
    added = [str(Path(p)) for p in path if str(Path(p)) not in sys.path]
    sys.path[:0] = added
    if is_main is not None:
        _targets.run_as_main(is_main, main_module_problem)
    _targets.import_pending()
    return status()


CANNOT_HOOK = ("missing", "unsupported")  # the states ``verifyprof hooks`` exits 1 for


def cannot_hook(statuses: Iterable[HookStatus]) -> list[HookStatus]:
    """The targets that cannot be hooked in this Python (``verifyprof hooks`` exits 1 when there is
    one): ``missing``, a target the user named whose function, module or package is not there, or
    a target in the program's ``__main__``; ``unsupported``, not a plain function. A preset's
    targets this Python lacks are ``absent``, never here: a preset lists names across versions of
    its server, so those are information, even when the whole server is not installed here."""
    return [s for s in statuses if s.state in CANNOT_HOOK]


def not_installed(status: HookStatus) -> str | None:
    """The top-level package of ``status``'s target when this Python does not have it at all
    (``check`` could not import the target's module: no module named that package), else None."""
    top = status.target.partition(":")[0].partition(".")[0]
    if status.state in ("missing", "absent") and f"No module named {top!r}" in status.detail:
        return top
    return None


def main_module_problem(module: str) -> str:
    """Why a target in the program's ``__main__`` module cannot be hooked, and what to do."""
    return (
        f"{module} is the program's main module: it runs as __main__ and defines its functions"
        " after the hooks are installed, so they cannot be wrapped; move the function into a"
        " module the program imports and hook it there"
    )


def status() -> list[HookStatus]:
    """Every requested target: ``patched``; ``pending`` (module not imported yet); ``absent`` (a
    preset
    alternative this version does not have: expected); ``missing`` (a target the user named that is
    not there); ``unsupported`` (not a plain function)."""
    return _targets.statuses()


def uninstall() -> None:
    """Restores every patched original and stops patching on import."""
    _targets.restore_all()


def _write_report() -> None:
    """``$VERIFYPROF_HOOKS_REPORT/hooks-<pid>.json``, rewritten atomically whenever a target changes
    state (processes of a server are often killed, so there is no exit hook to wait for)."""
    try:
        directory = Path(os.environ[ENV_REPORT])
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"hooks-{os.getpid()}.json"
        tmp = path.with_name(path.name + ".tmp")
        if not _report_argv:  # as at start-up: a spawn child's sys.argv later becomes its parent's
            _report_argv.append(sys.argv[:3])
        report = {
            "pid": os.getpid(),
            "argv": _report_argv[0],
            "hooks": [s.to_json() for s in status()],
        }
        tmp.write_text(json.dumps(report, indent=1))
        os.replace(tmp, path)
    except Exception:
        pass


def injection_env(
    presets: Iterable[str] = (),
    extra_hooks: Iterable[str] = (),
    *,
    report_dir: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Variables to merge into a server's environment so every process it spawns installs the hooks.

    Validates the presets and user hooks first (VerifyprofError with one line). Puts verifyprof's
    ``sitecustomize`` first on ``PYTHONPATH`` (it chains to any other one) and, if the server
    restricts SGLang plugins with ``SGLANG_PLUGINS``, adds verifyprof's to the list.
    """
    environ = os.environ if environ is None else environ
    items = [p.strip() for p in presets if p.strip()]
    for item in items:
        load_preset(item)
    hooks = [h.strip() for h in extra_hooks if h.strip()]
    for item in hooks:
        parse_user_hook(item)
    spec = ",".join(items + hooks)
    env = {ENV_HOOKS: spec}
    path = [
        p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(INJECT_DIR)
    ]
    env["PYTHONPATH"] = os.pathsep.join([str(INJECT_DIR)] + path)
    plugins = environ.get("SGLANG_PLUGINS", "").strip()
    if plugins and SGLANG_PLUGIN_NAME not in split_spec(plugins):
        env["SGLANG_PLUGINS"] = f"{plugins},{SGLANG_PLUGIN_NAME}"
    if report_dir is not None:
        env[ENV_REPORT] = str(report_dir)
    return env
