"""Inputs of ``whatif --from``: a breakdown JSON (or a trace, broken down here) and a capture manifest.

The model reads the breakdown's ``steps`` (schema ``verifyprof.breakdown/1``, docs/ARCHITECTURE.md)
and reduces them to one :class:`VerifyProfile`: the mean verify step of the critical device (the
slowest one: under tensor parallelism every rank waits for it), with the draft / accept /
draft-extend time per cycle and the decode baseline when the trace holds those ranges too.
Means, not medians: tokens/s over a run is total tokens over total time.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from verifyprof.contracts.errors import NoStepsError, VerifyprofError
from verifyprof.contracts.ranges import (
    ACCEPT,
    DECODE,
    DRAFT,
    DRAFT_EXTEND,
    SGLANG_VERIFY_PATTERN,
    SPEC_STEP,
    VERIFY,
)

SCHEMA_PREFIX = "verifyprof.breakdown/"
WHOLE_TRACE = "whole_trace"  # the step name of ``breakdown --whole-trace``
_SCHEMA_HEAD = re.compile(rb'"schema"\s*:\s*"verifyprof\.breakdown/')
NS_PER_MS = 1e6


def load_breakdown(source: str | Path, step_regex: str | None = None, whole_trace: bool = False) -> dict[str, Any]:
    """A breakdown JSON as a dict: read it, or break a trace down (nsys / Kineto) first."""
    path = Path(str(source))
    if path.is_file() and _is_breakdown_json(path):
        try:
            data = json.loads(path.read_bytes())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise VerifyprofError(f"not valid JSON: {exc}", path) from None
        return check_breakdown(data, path)
    from verifyprof.attribution.breakdown import breakdown
    from verifyprof.contracts.ranges import DEFAULT_STEP_REGEX
    from verifyprof.trace import load_trace

    result = breakdown(load_trace(source), step_regex=step_regex or DEFAULT_STEP_REGEX, whole_trace=whole_trace)
    return check_breakdown(result.to_json(), path)


def _is_breakdown_json(path: Path) -> bool:
    with path.open("rb") as handle:
        head = handle.read(4096)
    if head.startswith(b"\x1f\x8b"):
        return False  # gzipped JSON is a Kineto trace; breakdowns are written plain
    return bool(_SCHEMA_HEAD.search(head)) or (path.suffix == ".json" and b'"steps"' in head and b'"traceEvents"' not in head)


def check_breakdown(data: Any, path: Path | None = None) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise VerifyprofError("not a breakdown: expected a JSON object", path)
    schema = data.get("schema")
    if not isinstance(schema, str) or not schema.startswith(SCHEMA_PREFIX):
        raise VerifyprofError(f"not a verifyprof breakdown (schema {schema!r}, expected {SCHEMA_PREFIX}1)", path)
    steps = data.get("steps")
    if not isinstance(steps, list):
        raise VerifyprofError("breakdown has no 'steps' list", path)
    if not steps:
        raise NoStepsError("breakdown has no steps: nothing to model (check --range of `verifyprof breakdown`)", path)
    for i, step in enumerate(steps[:1]):
        for key in ("name", "wall_ns", "phases"):
            if key not in step:
                raise VerifyprofError(f"breakdown step {i} lacks {key!r}", path)
    return data


@dataclass
class StepGroup:
    """The mean of one group of steps on one device."""

    name: str
    device: int
    rank: int
    steps: int
    mode: str
    wall_ms: float
    gpu_span_ms: float  # first op start to last op end: the idle outside it is at the window's edges
    phases_ms: dict[str, float]
    totals_ms: dict[str, float]
    kernels: float
    launches: float
    graph_launches: float
    comm_calls: float | None
    comm_wait_ms: float | None
    counts: dict[str, float]  # kernels per phase, when the breakdown records them
    attrs: dict[str, str]


@dataclass
class VerifyProfile:
    verify: StepGroup
    width: int | None  # tokens per request in the verify forward (k + 1 for a chain)
    batch: int | None
    devices: int
    draft_ms: float | None = None  # per cycle
    accept_ms: float | None = None
    draft_extend_ms: float | None = None
    cycle_ms: float | None = None  # spec_step wall, when the trace has it
    decode_ms: float | None = None
    accept_len: float | None = None
    # Measured verify ms per width from one population of steps (the width sweep when there is one,
    # else the modelled steps): t(n) differences, applied to the modelled verify.
    width_times: dict[int, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    source: str = ""


def _is_verify(name: str) -> bool:
    return name == VERIFY or re.search(SGLANG_VERIFY_PATTERN, name) is not None


def _int_attr(attrs: dict[str, str], *keys: str) -> int | None:
    for key in keys:
        if key in attrs:
            try:
                return int(float(attrs[key]))
            except ValueError:
                continue
    return None


def _mean_group(name: str, device: int, rows: list[dict[str, Any]]) -> StepGroup:
    phase_names = list(rows[0]["phases"])
    phases = np.array([[r["phases"].get(p, 0) for p in phase_names] for r in rows], dtype=float).mean(axis=0)
    total_names = list(rows[0].get("totals", {}))
    totals = np.array([[r.get("totals", {}).get(t, 0) for t in total_names] for r in rows], dtype=float).reshape(len(rows), -1).mean(axis=0)
    modes = [r.get("mode", "none") for r in rows]
    comm = [r["comm"] for r in rows if isinstance(r.get("comm"), dict)]
    return StepGroup(
        name=name,
        device=device,
        rank=int(rows[0].get("rank", -1)),
        steps=len(rows),
        mode=max(sorted(set(modes)), key=modes.count),
        wall_ms=float(np.mean([r["wall_ns"] for r in rows])) / NS_PER_MS,
        gpu_span_ms=float(np.mean([r.get("gpu_span_ns", r["wall_ns"]) for r in rows])) / NS_PER_MS,
        phases_ms={p: float(v) / NS_PER_MS for p, v in zip(phase_names, phases)},
        totals_ms={t: float(v) / NS_PER_MS for t, v in zip(total_names, totals)},
        kernels=float(np.mean([r.get("kernels", 0) for r in rows])),
        launches=float(np.mean([r.get("launches", 0) for r in rows])),
        graph_launches=float(np.mean([r.get("graph_launches", 0) for r in rows])),
        comm_calls=float(np.mean([c.get("comm_calls", 0) for c in comm])) if comm else None,
        comm_wait_ms=float(np.mean([c.get("comm_wait_ns", 0) for c in comm])) / NS_PER_MS if comm else None,
        counts={p: float(np.mean([(r.get("counts") or {}).get(p, 0) for r in rows])) for p in (rows[0].get("counts") or {})},
        attrs=dict(rows[0].get("attrs") or {}),
    )


def verify_profile(
    data: dict[str, Any],
    step_name: str | None = None,
    width: int | None = None,
    mode: str | None = None,
    sweep: bool = False,
) -> VerifyProfile:
    """Reduce a breakdown to the verify step the model works on.

    ``step_name`` picks the step group (default: ``verifyprof.verify`` or SGLang's TARGET_VERIFY);
    ``width`` the verify width when the trace holds several (default: the most frequent);
    ``mode`` ("eager" | "graph") when it holds both (default: the most frequent). Verify steps of
    a width sweep (attribute ``sweep=1``, the workload's t(n) measurement) are kept apart: they
    give t(n) at other widths, and with ``sweep=True`` they are the steps modelled.
    """
    path = (data.get("trace", {}).get("path") or [""])[0]
    where = path or None
    steps = data["steps"]
    names = sorted({s["name"] for s in steps})
    notes: list[str] = []
    if step_name is not None:
        chosen = [s for s in steps if s["name"] == step_name]
        if not chosen:
            raise NoStepsError(f"no steps named {step_name!r} in the breakdown (it has: {', '.join(names)})", where)
    else:
        chosen = [s for s in steps if _is_verify(s["name"])]
        if not chosen and names == [WHOLE_TRACE]:
            chosen = list(steps)
            notes.append("whole-trace breakdown: the whole trace is modelled as one verify step")
        if not chosen:
            raise NoStepsError(
                f"breakdown has no verify steps ({VERIFY} or TARGET_VERIFY); it has: {', '.join(names)} "
                "(pick one with --step NAME)",
                where,
            )
    chosen = [s for s in chosen if int(s.get("device", -1)) >= 0] or chosen
    is_sweep = [_attrs(s).get("sweep") == "1" for s in chosen]
    if sweep:
        pool = [s for s, sw in zip(chosen, is_sweep) if sw]
        if not pool:
            raise NoStepsError("breakdown has no width-sweep verify steps (sweep=1)", where)
    else:
        pool = [s for s, sw in zip(chosen, is_sweep) if not sw] or chosen
    sweeps = [s for s, sw in zip(chosen, is_sweep) if sw]

    modes = [s.get("mode", "none") for s in pool]
    if mode is None:
        mode = max(sorted(set(modes)), key=modes.count)
        if len(set(modes)) > 1:
            notes.append(f"verify steps run in several modes {sorted(set(modes))}: modelling the most frequent, {mode} (pick with --mode)")
    in_mode = [s for s in pool if s.get("mode", "none") == mode]
    if not in_mode:
        raise NoStepsError(f"no verify steps in {mode} mode (the breakdown has {sorted(set(modes))})", where)

    widths = [_width(s) for s in in_mode]
    known = [w for w in widths if w is not None]
    if width is None and known:
        width = max(sorted(set(known)), key=known.count)
        if len(set(known)) > 1:
            notes.append(f"verify steps of several widths {sorted(set(known))}: modelling the most frequent, {width} (pick with --width)")
    main = [s for s, w in zip(in_mode, widths) if w == width] if width is not None and known else in_mode
    if not main:
        raise NoStepsError(f"no verify steps of width {width} (the breakdown has widths {sorted(set(known))})", where)
    batch_values = [b for b in (_int_attr(_attrs(s), "bs", "batch") for s in main) if b is not None]
    batch = max(sorted(set(batch_values)), key=batch_values.count) if batch_values else None

    by_device: dict[int, list[dict[str, Any]]] = {}
    for step in main:
        by_device.setdefault(int(step.get("device", -1)), []).append(step)
    groups = {dev: _mean_group(main[0]["name"], dev, rows) for dev, rows in by_device.items()}
    critical = max(groups.values(), key=lambda g: g.wall_ms)
    if len(groups) > 1:
        notes.append(
            f"{len(groups)} devices: modelling device {critical.device} (rank {critical.rank}), the slowest "
            f"({critical.wall_ms:.3f} ms vs fastest {min(g.wall_ms for g in groups.values()):.3f} ms)"
        )
    on_device = lambda s: int(s.get("device", -1)) in (critical.device, -1)

    width_times: dict[int, float] = {}
    width_pool = [s for s in (sweeps if sweeps else in_mode) if s.get("mode") == mode and on_device(s)]
    for w in sorted({_width(s) for s in width_pool} - {None}):
        rows = [s for s in width_pool if _width(s) == w]
        width_times[w] = float(np.mean([r["wall_ns"] for r in rows])) / NS_PER_MS

    # The cycle around the modelled verify steps: spec_step ranges containing them, and the
    # draft / accept / draft-extend ranges inside those (by start time, on the same device).
    specs = [s for s in steps if s["name"] == SPEC_STEP and on_device(s)]
    main_here = [s for s in main if s.get("device") == critical.device]
    cycle = _containing(specs, main_here)
    n_cycles = critical.steps
    exclusive: dict[str, float] = {}
    if cycle:
        phase_steps = [s for s in steps if s["name"] in (DRAFT, ACCEPT, DRAFT_EXTEND) and on_device(s)]
        members = _in_windows(cycle, phase_steps + main_here)
        n_cycles = len(cycle)
        exclusive = _exclusive_ms(cycle, members)
        overlap = critical.wall_ms - exclusive.get("verify", critical.wall_ms * n_cycles) / n_cycles
        if overlap > 1e-6:
            _trim_idle(critical, overlap)
            notes.append(
                f"verify ranges start while the GPU still runs the previous phase (host ahead): {overlap:.3f} ms per step of "
                f"their windows is that phase's work; modelled as the verify's own {critical.wall_ms:.3f} ms (idle time trimmed)"
            )
        members = [s for s in members if s["name"] != VERIFY]
    else:
        graph_attr = _attrs(main[0]).get("graph")
        members = [
            s for s in steps
            if s["name"] in (DRAFT, ACCEPT, DRAFT_EXTEND) and on_device(s)
            and (graph_attr is None or _attrs(s).get("graph") in (None, graph_attr))
        ]

    def per_cycle(name: str) -> float | None:
        key = name.removeprefix("verifyprof.")
        if key in exclusive:
            return exclusive[key] / n_cycles
        rows = [s for s in members if s["name"] == name]
        return sum(r["wall_ns"] for r in rows) / n_cycles / NS_PER_MS if rows else None

    graph_attr = _attrs(main[0]).get("graph")
    decodes = [
        s for s in steps
        if s["name"] == DECODE and on_device(s)
        and (_attrs(s).get("graph") == graph_attr if graph_attr is not None else s.get("mode") == mode)
    ]
    accepted = [_float_attr(_attrs(s), "accept_len") for s in (cycle or [])]
    accepted = [a for a in accepted if a is not None]
    return VerifyProfile(
        verify=critical,
        width=width,
        batch=batch,
        devices=len(groups),
        draft_ms=per_cycle(DRAFT),
        accept_ms=per_cycle(ACCEPT),
        draft_extend_ms=per_cycle(DRAFT_EXTEND),
        cycle_ms=float(np.mean([c["wall_ns"] for c in cycle])) / NS_PER_MS if cycle else None,
        decode_ms=float(np.mean([d["wall_ns"] for d in decodes])) / NS_PER_MS if decodes else None,
        accept_len=float(np.mean(accepted)) if accepted else None,
        width_times=width_times,
        notes=notes,
        source=str(path),
    )


def _attrs(step: dict[str, Any]) -> dict[str, str]:
    return step.get("attrs") or {}


def _width(step: dict[str, Any]) -> int | None:
    return _int_attr(_attrs(step), "tokens", "width", "num_tokens")


def _containing(outer: list[dict[str, Any]], inner: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``outer`` steps whose window contains the start of some ``inner`` step."""
    if not outer or not inner:
        return []
    outer = sorted(outer, key=lambda s: s["start_ns"])
    starts = np.array([s["start_ns"] for s in outer], dtype=np.int64)
    ends = np.array([s["end_ns"] for s in outer], dtype=np.int64)
    points = np.array([s["start_ns"] for s in inner], dtype=np.int64)
    slot = np.searchsorted(starts, points, side="right") - 1
    ok = (slot >= 0) & (points < ends[np.clip(slot, 0, None)])
    return [outer[i] for i in sorted(set(slot[ok].tolist()))]


def _float_attr(attrs: dict[str, str], *keys: str) -> float | None:
    for key in keys:
        if key in attrs:
            try:
                return float(attrs[key])
            except ValueError:
                continue
    return None


def _in_windows(windows: list[dict[str, Any]], steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``steps`` starting inside one of the (sorted, disjoint) ``windows``; each tagged with its window."""
    starts = np.array([w["start_ns"] for w in windows], dtype=np.int64)
    ends = np.array([w["end_ns"] for w in windows], dtype=np.int64)
    points = np.array([s["start_ns"] for s in steps], dtype=np.int64)
    slot = np.searchsorted(starts, points, side="right") - 1
    ok = (slot >= 0) & (points < ends[np.clip(slot, 0, None)])
    return [dict(s, _cycle=int(i)) for s, i, good in zip(steps, slot, ok) if good]


def _exclusive_ms(windows: list[dict[str, Any]], members: list[dict[str, Any]]) -> dict[str, float]:
    """Per phase, the summed time each step adds to its cycle: from the later of its start and the
    previous phase's end to its own end (the CUDA-event definition). Windows of a host running
    ahead overlap the previous phase's GPU work; this counts that work once."""
    out: dict[str, float] = {}
    by_cycle: dict[int, list[dict[str, Any]]] = {}
    for step in members:
        by_cycle.setdefault(step["_cycle"], []).append(step)
    for index, rows in by_cycle.items():  # cycles x ~4 phases: output-sized work
        previous = windows[index]["start_ns"]
        for step in sorted(rows, key=lambda s: s["start_ns"]):
            own = max(step["end_ns"] - max(step["start_ns"], previous), 0)
            key = step["name"].removeprefix("verifyprof.")
            out[key] = out.get(key, 0.0) + own / NS_PER_MS
            previous = max(previous, step["end_ns"])
    return out


def _trim_idle(group: StepGroup, overlap_ms: float) -> None:
    """Take ``overlap_ms`` out of a step's idle phases (launch gap first), keeping phases summing to wall."""
    left = overlap_ms
    for phase in ("launch_gap", "host_wait"):
        take = min(group.phases_ms.get(phase, 0.0), left)
        group.phases_ms[phase] = group.phases_ms.get(phase, 0.0) - take
        left -= take
    group.wall_ms -= overlap_ms - left
