"""What a finished capture hands back: its manifest, the numbers a program reported about itself,
and the lines the CLI prints about them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from verifyprof.capture.target_hooks import never_fired_lines
from verifyprof.contracts.manifest import MANIFEST

PROGRAM_RESULTS = "results.json"  # a program may write its own numbers here (see program_results)


@dataclass
class CaptureResult:
    out: Path
    manifest: dict

    @property
    def manifest_path(self) -> Path:
        return self.out / MANIFEST


def program_results(out: Path) -> dict:
    """What a program reported about itself: ``$VERIFYPROF_CAPTURE_DIR/results.json`` (a JSON
    object, e.g. ``{"accept_len": 2.1, "tokens_per_s": 95.0, "baseline_tokens_per_s": 60.0}``),
    which becomes the manifest's ``results``; empty when it wrote none or not an object."""
    path = out / PROGRAM_RESULTS
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def summary_lines(result: CaptureResult) -> list[str]:
    """What the CLI prints after a successful capture."""
    doc = result.manifest
    lines = []
    res = doc.get("results") or {}
    if res:
        tps = res.get("tokens_per_s")
        acc = res.get("accept_len")
        srv = res.get("server_avg_spec_accept_length")
        if "requests_ok" in res:
            lines.append(
                f"requests: {res['requests_ok']} ok, {res.get('requests_failed', 0)} failed; "
                + (f"{res.get('completion_tokens', 0)} tokens at {tps:,.1f} tok/s" if tps else "no completed requests")
            )
        elif isinstance(tps, (int, float)):
            lines.append(f"throughput: {tps:,.1f} tok/s (reported by the program)")
        lines.append(
            "accept length: " + (f"{acc:.3f} tokens/verify" if isinstance(acc, (int, float)) else "not reported")
            + (f", server average {srv:.3f}" if isinstance(srv, (int, float)) else "")
        )
    lines.extend(hook_lines(doc.get("hooks") or {}))
    if (doc.get("window") or {}).get("duration_ns"):
        what = "capture window" if doc.get("mode") == "server" else "program ran"
        lines.append(f"{what}: {doc['window']['duration_ns'] / 1e9:.2f} s")
    for trace in doc.get("traces", []):
        lines.append(f"trace: {result.out / trace['path']} ({trace['kind']}, {trace['bytes']:,} bytes)")
    lines.append(f"manifest: {result.manifest_path}")
    return lines


def hook_lines(hooks: dict) -> list[str]:
    """Which hooks fired (ranges per preset entry / user hook) and every one that never did."""
    fired = hooks.get("fired") or {}
    never = hooks.get("never_fired") or []
    if not fired and not never:
        return []
    lines = []
    if fired:
        processes = len(hooks.get("processes") or [])
        parts = ", ".join(f"{source}: {n:,}" for source, n in fired.items())
        lines.append(f"hook ranges: {parts} (in {processes} process{'es' if processes != 1 else ''})")
    else:
        lines.append("hook ranges: none recorded")
    if never:
        lines.append(f"never fired ({len(never)}):")
        lines.extend(never_fired_lines(hooks))
    return lines
