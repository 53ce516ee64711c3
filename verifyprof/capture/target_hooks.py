"""Which NVTX hooks a capture's target gets, the environment that injects them into it and every
process it spawns, and what those processes reported back: which preset entries and user hooks
fired (opened a range) and which never did, for the manifest, the summary and the exit code."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from verifyprof.capture.request import CaptureOptions

DEFAULT_SERVER_HOOKS = ("sglang",)
_STATE_RANK = {"patched": 0, "pending": 1, "unsupported": 2, "missing": 3, "absent": 4}


def hook_presets(opts: CaptureOptions) -> list[str]:
    presets = (
        list(DEFAULT_SERVER_HOOKS if opts.mode == "server" else ())
        if opts.hooks is None
        else list(opts.hooks)
    )
    return [p for p in presets if p and p != "none"]


def hooks_env(presets: list[str], targets: list[str], report_dir: Path) -> dict[str, str]:
    """The environment that makes the target (and its spawned TP processes) load the hooks; each
    process reports what it patched into ``report_dir``."""
    if not presets and not targets:
        return {}
    from verifyprof.capture.hooks.api import injection_env

    return dict(injection_env(presets, targets, report_dir=report_dir, environ=os.environ))


@dataclass(frozen=True)
class Requested:
    """One preset entry or user hook of the spec: what the summary reports as fired or not."""

    # the label every process reports it under: "sglang.toml hook 3", "user hook
    # m:f=verify"
    source: str
    phase: str
    targets: tuple[str, ...]
    user: bool


def requested(presets: list[str], targets: list[str]) -> list[Requested]:
    if not presets and not targets:
        return []
    from verifyprof.capture.hooks.presets import load_preset, parse_user_hook

    entries = [e for p in presets for e in load_preset(p).entries] + [
        parse_user_hook(t) for t in targets
    ]
    return [
        Requested(e.source, e.phase, tuple(str(a.target) for a in e.alternatives), e.user)
        for e in entries
    ]


def _read_reports(report_dir: Path) -> list[dict]:
    reports = []
    for path in sorted(report_dir.glob("hooks-*.json")) if report_dir.is_dir() else []:
        try:
            report = json.loads(path.read_text())
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(report, dict) and isinstance(report.get("hooks"), list):
            reports.append(report)
    return reports


def _process_row(report: dict) -> dict:
    states: dict[str, list[str]] = {}
    calls: dict[str, int] = {}
    for hook in report["hooks"]:
        if not isinstance(hook, dict):
            continue
        states.setdefault(hook.get("state", "?"), []).append(hook.get("target", "?"))
        for source, n in (hook.get("calls") or {}).items():
            calls[source] = calls.get(source, 0) + int(n)
    return {
        "pid": report.get("pid"),
        "argv": report.get("argv"),
        "patched": len(states.get("patched", [])),
        "pending": len(states.get("pending", [])),
        "missing": states.get("missing", []) + states.get("unsupported", []),
        "calls": calls,
    }


def _never_fired(want: Requested, reports: list[dict]) -> dict:
    """Why ``want`` opened no range: the best state any process got its targets to, and the
    detail."""
    seen = [
        h
        for r in reports
        for h in r["hooks"]
        if isinstance(h, dict) and want.source in (h.get("sources") or [])
    ]
    best = min(seen, key=lambda h: _STATE_RANK.get(h.get("state", ""), 9), default=None)
    state = best.get("state", "not installed") if best else "not installed"
    if best is None:
        detail = (
            "no process installed it (did the program start Python with the injected PYTHONPATH?)"
        )
    elif state == "patched":
        detail = "patched, but never called (or its condition never held)"
    elif len(want.targets) > 1 and state in ("absent", "pending"):
        detail = (
            f"none of its {len(want.targets)} targets was"
            f" {'imported' if state == 'pending' else 'present'}"
        )
    else:
        detail = best.get("detail") or state
    return {
        "source": want.source,
        "phase": want.phase,
        "targets": list(want.targets),
        "state": state,
        "detail": detail,
    }


def hooks_record(
    presets: list[str],
    targets: list[str],
    env: dict[str, str],
    report_dir: Path,
    program_folder: Path | None = None,
) -> dict:
    """The manifest's ``hooks``: what was asked, the processes that opened ranges (others only
    counted: a compile worker or a tokenizer process is no phase of the step), the ranges per
    source, and every source that never fired with the reason."""
    reports = _read_reports(report_dir)
    rows = [_process_row(r) for r in reports]
    fired: dict[str, int] = {}
    for row in rows:
        for source, n in row["calls"].items():
            fired[source] = fired.get(source, 0) + n
    wanted = requested(presets, targets)
    return {
        "presets": presets,
        "targets": targets,
        "env": sorted(env),
        "program_folder": str(program_folder) if program_folder else None,
        "processes": [row for row in rows if row["calls"]],
        "idle_processes": sum(1 for row in rows if not row["calls"]),
        "fired": fired,
        "never_fired": [_never_fired(w, reports) for w in wanted if not fired.get(w.source)],
    }


def never_fired_lines(hooks: dict) -> list[str]:
    """One line per preset entry / user hook that never opened a range (the summary, the error)."""
    return [
        f"  {row['source']} ({row['phase']}): {row['state']}: {row['detail']}"
        for row in hooks.get("never_fired") or []
    ]
