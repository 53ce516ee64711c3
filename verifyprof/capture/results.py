"""What a finished capture hands back: its manifest, the numbers a program reported about itself,
and the lines the CLI prints about them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from verifyprof.capture.log_results import PROBLEMS, results_from_log
from verifyprof.capture.target_hooks import never_fired_lines
from verifyprof.contracts.bounds import check_results
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.manifest import (
    ACCEPT_CONVENTIONS,
    MANIFEST,
    to_tokens_per_verify,
)
from verifyprof.contracts.manifest_dilation import SETTLED, starts_cold_unsettled
from verifyprof.contracts.plumbing.inputs import MANIFEST_LIMIT, parse_json, read_text
from verifyprof.contracts.plumbing.text import safe_text

PROGRAM_RESULTS = "results.json"  # a program may write its own numbers here (see program_results)


@dataclass
class CaptureResult:
    out: Path
    manifest: dict

    @property
    def manifest_path(self) -> Path:
        return self.out / MANIFEST


def program_results(
    out: Path, convention: str | None = None, patterns: tuple[tuple[str, str], ...] = ()
) -> dict:
    """What a program reported about itself: ``$VERIFYPROF_CAPTURE_DIR/results.json`` (a JSON
    object, e.g. ``{"accept_len": 2.1, "tokens_per_s": 95.0, "baseline_tokens_per_s": 60.0}``),
    which becomes the manifest's ``results``; empty when it wrote none. One it wrote that cannot
    be read (not JSON, not UTF-8, not an object, ...) or a number out of range or not finite
    (NaN) is a VerifyprofError naming the file and the problem, never dropped without a word.
    ``accept_len`` is converted to tokens per verify (see :func:`accept_in_tokens_per_verify`).
    ``patterns`` (``--result NAME=REGEX``) add what the program printed to ``out/program.log``;
    they win over a results.json field of the same name."""
    path = out / PROGRAM_RESULTS
    data = {}
    if path.exists() or path.is_symlink():
        try:
            data = parse_json(read_text(path, "results.json", MANIFEST_LIMIT), "results.json", path)
        except json.JSONDecodeError as err:
            raise VerifyprofError(
                f"the program's results.json is not valid JSON: {err.msg} (line {err.lineno})", path
            ) from None
        if not isinstance(data, dict):
            raise VerifyprofError("the program's results.json is not a JSON object", path)
    data = data | results_from_log(out / "program.log", patterns)
    if not data:
        return {}
    return accept_in_tokens_per_verify(check_results(data, path), convention)  # finite, in range


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def accept_in_tokens_per_verify(results: dict, convention: str | None) -> dict:
    """``accept_len`` as verifyprof counts it (tokens per verify step, bonus token included), from
    a program that may count accepted drafts only (one less): the convention is ``convention``
    (``--accept-len-convention``), else the program's own ``accept_len_convention``, else tokens
    per verify, assumed and said so. ``accepted_drafts_per_verify`` alone is converted too. The
    reported value and its convention are kept beside the converted one."""
    out = dict(results)
    value, given = out.get("accept_len"), convention or out.get("accept_len_convention")
    if not _number(value) and _number(out.get("accepted_drafts_per_verify")):
        value, given = out["accepted_drafts_per_verify"], convention or "accepted_drafts"
    if not _number(value):
        return out
    if given not in ACCEPT_CONVENTIONS:
        out["accept_len_convention_problem"] = f"unknown convention {given!r}" if given else None
        given = None
    used = given or "tokens_per_verify"
    out["accept_len"] = to_tokens_per_verify(float(value), used)
    out["accept_len_convention"] = "tokens_per_verify"
    out["accept_len_reported"] = value
    out["accept_len_reported_convention"] = used
    out["accept_len_convention_assumed"] = given is None
    if out.get("accept_len_convention_problem") is None:
        out.pop("accept_len_convention_problem", None)
    return out


def accept_line(res: dict, mode: str | None) -> str:
    """The accept length with its convention named (and what the program reported, converted)."""
    acc = res.get("accept_len")
    if not _number(acc):
        return "accept length: not reported"
    line = f"accept length: {acc:.3f} tokens/verify (bonus token included"
    reported, convention = res.get("accept_len_reported"), res.get("accept_len_reported_convention")
    if mode == "server":
        line += "; completion tokens / verify steps, as SGLang counts"
    elif convention == "accepted_drafts":
        line += f"; the program reported {reported:.3f} accepted drafts/verify, +1"
    elif res.get("accept_len_convention_assumed"):
        line += (
            "; as the program reported it, read as tokens per verify: if it counts accepted drafts"
            " only, "
        )
        line += "pass --accept-len-convention accepted_drafts"
    srv = res.get("server_avg_spec_accept_length")
    return line + ")" + (f", server average {srv:.3f}" if _number(srv) else "")


def dilation_line(dilation: dict | None) -> str | None:
    if not dilation:
        return None
    factor, source = dilation.get("factor"), dilation.get("source")
    if not _number(factor):
        return f"profiler dilation: not measured ({dilation.get('note') or source})"
    runs = [v for v in dilation.get("baseline_runs_tokens_per_s") or [] if _number(v)]
    if len(runs) > 1:  # the median of several: say how far apart they were
        unprofiled = dilation["unprofiled_tokens_per_s"]
        source += (
            f", the median of {len(runs)}: {', '.join(f'{v:,.1f}' for v in runs)} tok/s,"
            f" spread {100 * (max(runs) - min(runs)) / unprofiled:.0f}%"
        )
    unprofiled = (dilation.get("samples") or {}).get("unprofiled")
    if starts_cold_unsettled(unprofiled):
        source += (
            f"; its unprofiled samples {', '.join(f'{v:,.1f}' for v in unprofiled)} tok/s start"
            f" cold and fewer than {SETTLED} warm ones follow: run {SETTLED + 1} or more samples"
            " for a settled rate"
        )
    return (
        f"profiler dilation: {factor:.2f}x (unprofiled {dilation['unprofiled_tokens_per_s']:,.1f}"
        f" tok/s, profiled {dilation['profiled_tokens_per_s']:,.1f} tok/s; {source})"
    )


def summary_lines(result: CaptureResult) -> list[str]:
    """What the CLI prints after a successful capture."""
    doc = result.manifest
    lines = []
    res = doc.get("results") or {}
    if res:
        tps = res.get("tokens_per_s")
        if "requests_ok" in res:
            lines.append(
                f"requests: {res['requests_ok']} ok, {res.get('requests_failed', 0)} failed; "
                + (
                    f"{res.get('completion_tokens', 0)} tokens at {tps:,.1f} tok/s"
                    if tps
                    else "no completed requests"
                )
            )
        elif isinstance(tps, (int, float)):
            lines.append(f"throughput: {tps:,.1f} tok/s (reported by the program)")
        lines.append(accept_line(res, doc.get("mode")))
    lines.extend(res.get(PROBLEMS) or [])
    dilation = dilation_line(doc.get("dilation"))
    if dilation:
        lines.append(dilation)
    lines.extend(hook_lines(doc.get("hooks") or {}))
    if (doc.get("window") or {}).get("duration_ns"):
        what = "capture window" if doc.get("mode") == "server" else "program ran"
        lines.append(f"{what}: {doc['window']['duration_ns'] / 1e9:.2f} s")
    for trace in doc.get("traces", []):
        lines.append(
            f"trace: {safe_text(str(result.out / trace['path']))} ({trace['kind']},"
            f" {trace['bytes']:,} bytes)"
        )
    lines.append(f"manifest: {safe_text(str(result.manifest_path))}")  # a name: escaped
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
        lines.append(
            f"hook ranges: {parts} (in {processes} process{'es' if processes != 1 else ''})"
        )
    else:
        lines.append("hook ranges: none recorded")
    if never:
        lines.append(f"never fired ({len(never)}):")
        lines.extend(never_fired_lines(hooks))
    return lines
