"""Which NVTX hooks a capture's target gets, the environment that injects them into it and every
process it spawns, and what each of those processes reported back (for the manifest)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from verifyprof.capture.options import CaptureOptions

DEFAULT_SERVER_HOOKS = ("sglang",)


def hook_presets(opts: CaptureOptions) -> list[str]:
    presets = list(DEFAULT_SERVER_HOOKS if opts.mode == "server" else ()) if opts.hooks is None else list(opts.hooks)
    return [p for p in presets if p and p != "none"]


def hooks_env(presets: list[str], targets: list[str], report_dir: Path) -> dict[str, str]:
    """The environment that makes the target (and its spawned TP processes) load the hooks; each
    process reports what it patched into ``report_dir``."""
    if not presets and not targets:
        return {}
    from verifyprof.capture.hooks.api import injection_env

    return dict(injection_env(presets, targets, report_dir=report_dir, environ=os.environ))


def hook_reports(report_dir: Path) -> list[dict]:
    """Per process that installed hooks: how many targets it patched, and which it could not find."""
    rows = []
    for path in sorted(report_dir.glob("hooks-*.json")) if report_dir.is_dir() else []:
        try:
            report = json.loads(path.read_text())
            states: dict[str, list[str]] = {}
            for hook in report.get("hooks", []):
                states.setdefault(hook.get("state", "?"), []).append(hook.get("target", "?"))
        except (OSError, ValueError, AttributeError):
            continue
        rows.append({
            "pid": report.get("pid"), "argv": report.get("argv"),
            "patched": len(states.get("patched", [])), "pending": len(states.get("pending", [])),
            "missing": states.get("missing", []) + states.get("unsupported", []),
        })
    return rows
