"""Write a large, realistic PyTorch-profiler (Kineto) trace by tiling a real one.

The real B200 vLLM MoE trace in ``shared/traces/public/kineto`` (one eager inference step,
24,656 events, 62% of them ``python_function``) is repeated N times back to back: each copy is
shifted in time past the previous one, and gets fresh correlation ids (runtime/driver calls,
GPU ops and ``ac2g`` flows alike), External ids and Python ids, so links stay unique as in a
real long capture. Metadata (``ph: M``) events are written once. The output uses Kineto's own
layout (one field group per line) so its size and parse cost match what the profiler writes.

    python bench/gen_kineto_trace.py --mb 150 --out bench/out/kineto_large.json [--gzip]
"""

from __future__ import annotations

import argparse
import copy
import gzip
import sys
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = REPO / "tests/data/public/kineto/tracelens_b200_vllm_moe_eager_trace.json.gz"

HEAD_FIELDS = ("ph", "cat", "name", "pid", "tid", "id")
TIME_FIELDS = ("ts", "dur")
ID_ARGS = ("correlation", "External id", "Python id", "Python parent id", "Ev Idx")


def load(path: Path) -> dict:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return orjson.loads(data)


def _value(value: object) -> str:
    return orjson.dumps(value).decode()


def format_event(event: dict) -> str:
    """One event the way libkineto's ChromeTraceLogger lays it out."""
    head = ", ".join(f'"{k}": {_value(event[k])}' for k in event if k in HEAD_FIELDS)
    times = ", ".join(f'"{k}": {_value(event[k])}' for k in event if k in TIME_FIELDS)
    rest = ", ".join(
        f'"{k}": {_value(event[k])}'
        for k in event
        if k not in HEAD_FIELDS and k not in TIME_FIELDS and k != "args"
    )
    lines = ["  {", f"    {head}" + ("," if times or rest or "args" in event else "")]
    if times:
        lines.append(f"    {times}" + ("," if rest or "args" in event else ""))
    if rest:
        lines.append(f"    {rest}" + ("," if "args" in event else ""))
    if "args" in event:
        args = ", ".join(f'"{k}": {_value(v)}' for k, v in event["args"].items())
        lines += ['    "args": {', f"      {args}", "    }"]
    lines.append("  }")
    return "\n".join(lines)


def id_spans(events: list[dict]) -> dict[str, int]:
    """Per id kind, one more than the largest value, so copy k can add k * span."""
    spans = {key: 0 for key in ID_ARGS}
    spans["flow"] = 0
    for event in events:
        args = event.get("args") or {}
        for key in ID_ARGS:
            value = args.get(key)
            if isinstance(value, int):
                spans[key] = max(spans[key], value + 1)
        if event.get("ph") in ("s", "f", "t") and isinstance(event.get("id"), int):
            spans["flow"] = max(spans["flow"], event["id"] + 1)
    spans["correlation"] = spans["flow"] = max(spans["correlation"], spans["flow"])
    return spans


def shifted(event: dict, k: int, dt_us: float, spans: dict[str, int]) -> dict:
    if k == 0:
        return event
    out = copy.copy(event)
    if "ts" in out and isinstance(out["ts"], (int, float)):
        out["ts"] = round(out["ts"] + k * dt_us, 3)
    if out.get("ph") in ("s", "f", "t") and isinstance(out.get("id"), int):
        out["id"] = out["id"] + k * spans["flow"]
    args = out.get("args")
    if args:
        args = dict(args)
        for key in ID_ARGS:
            if isinstance(args.get(key), int):
                args[key] = args[key] + k * spans[key]
        out["args"] = args
    return out


def generate(source: Path, out: Path, target_mb: float, use_gzip: bool) -> dict:
    doc = load(source)
    events: list[dict] = doc["traceEvents"]
    meta_events = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]
    stamps = [e["ts"] for e in body if isinstance(e.get("ts"), (int, float))]
    ends = [e["ts"] + e.get("dur", 0) for e in body if isinstance(e.get("ts"), (int, float))]
    dt_us = round(max(ends) - min(stamps) + 1000.0, 3)  # copies 1 ms apart
    spans = id_spans(body)

    header = {k: v for k, v in doc.items() if k not in ("traceEvents", "traceName")}
    head_text = (
        orjson.dumps(header, option=orjson.OPT_INDENT_2).decode().rstrip().rstrip("}").rstrip()
    )
    one_copy = sum(len(format_event(e)) + 2 for e in body)
    copies = max(1, round(target_mb * 1e6 / one_copy))

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    opener = (
        (lambda p: gzip.open(p, "wt", compresslevel=1)) if use_gzip else (lambda p: p.open("w"))
    )
    n_events = 0
    with opener(tmp) as handle:
        handle.write(head_text + ',\n  "traceEvents": [\n')
        first = True
        for event in meta_events:
            handle.write(("" if first else ",\n") + format_event(event))
            first = False
            n_events += 1
        for k in range(copies):
            chunk = ",\n".join(format_event(shifted(e, k, dt_us, spans)) for e in body)
            handle.write(("" if first else ",\n") + chunk)
            first = False
            n_events += len(body)
        handle.write('\n  ],\n  "traceName": ' + _value(str(out)) + "\n}\n")
    tmp.replace(out)
    kernels = sum(1 for e in body if e.get("cat") == "kernel") * copies
    return {
        "path": str(out),
        "bytes": out.stat().st_size,
        "events": n_events,
        "copies": copies,
        "kernels": kernels,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--source", type=Path, default=DEFAULT_SOURCE, help="real Kineto trace to tile"
    )
    parser.add_argument(
        "--mb", type=float, default=150.0, help="target size of the uncompressed JSON, MB"
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench/out/kineto_large.json")
    parser.add_argument("--gzip", action="store_true", help="write .json.gz (as SGLang does)")
    args = parser.parse_args(argv)
    info = generate(args.source, args.out, args.mb, args.gzip)
    print(orjson.dumps(info).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
