"""The verify step the model works on, reduced from a breakdown's steps frame.

:func:`verify_profile` picks the verify steps (``verifyprof.verify`` or SGLang's TARGET_VERIFY),
one mode and one width, and takes the mean step of the critical device (the slowest one: under
tensor parallelism every rank waits for it), with the draft / accept / draft-extend time per
cycle and the decode baseline when the trace holds those ranges too. Means, not medians:
tokens/s over a run is total tokens over total time. Everything is grouped pandas over the
frame; the model never reads a trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from verifyprof.contracts import phases
from verifyprof.contracts.errors import NoStepsError
from verifyprof.contracts.plumbing.text import counted
from verifyprof.contracts.ranges import VERIFY, is_phase
from verifyprof.contracts.schema import (
    COMM_COLUMNS,
    WHOLE_TRACE,
    BreakdownFrame,
    variant,
)
from verifyprof.model.inputs.calibration import graph_calibration
from verifyprof.model.inputs.step_attrs import with_attr_columns
from verifyprof.model.inputs.step_group import StepGroup
from verifyprof.model.inputs.windows import _cycle

NS_PER_MS = 1e6


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
    # the same steps' MoE expert GEMM per width (issue 42): a sweep whose tokens route unlike the
    # cycle's (one token repeated across the width) says so against the verify's own
    width_moe: dict[int, float] = field(default_factory=dict)
    # and their MoE routing kernels per width (moe_aux): its work is the token-expert pairs, which
    # a repeated token sorts as any other, so the sweep measures it over tokens per forward
    width_routing: dict[int, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    source: str = ""
    draft_group: StepGroup | None = None  # the mean draft / draft-extend step, when traced
    draft_extend_group: StepGroup | None = None
    accept_group: StepGroup | None = None
    cycle_group: StepGroup | None = None  # the mean spec_step (whole cycle), when traced
    decode_group: StepGroup | None = None  # the mean plain decode step, when traced
    choice: str = ""  # which step group is modelled, and why that one
    # launch and replay costs measured on the trace's own graph steps (us): graph_node_us,
    # graph_launch_us, compiled_call_us, where it has enough of them
    calibration: dict[str, float] = field(default_factory=dict)
    # the cycle is a derived window (no range spans it): its time outside the phases' ranges is
    # the program's own loop
    loop_derived: bool = False
    # the trace holds speculative steps (verify, draft, accept, draft-extend or spec_step ranges,
    # or a verify over more than one token): False for a plain decode or training trace, which
    # gets no verdict on speculation
    speculative: bool = True


# the phases only a speculative program has (data/ranges.toml): decode and prefill are not
SPECULATIVE_PHASES = ("spec_step", "draft", "verify", "accept", "draft_extend")


def verify_profile(
    frame: BreakdownFrame,
    step_name: str | None = None,
    width: int | None = None,
    mode: str | None = None,
    sweep: bool = False,
) -> VerifyProfile:
    """Reduce a breakdown to the verify step the model works on.

    ``step_name`` picks the step group (default: the verify steps); ``width`` the verify width
    when the trace holds several (default: the most frequent); ``mode`` ("eager" | "graph") when
    it holds both (default: the most frequent; ties go to the first in sorted order). Verify
    steps of a width sweep (attribute ``sweep=1``) are kept apart: they give t(n) at other
    widths, and with ``sweep=True`` they are the steps modelled.
    """
    steps = with_attr_columns(frame.steps)
    where = frame.source or None
    notes: list[str] = []
    chosen = _chosen_steps(steps, step_name, notes, where)
    sweep = sweep or _only_swept(chosen, width, notes)
    pool, sweeps = _split_sweep(chosen, sweep, where)
    if mode == "compile":  # a torch.compile run's verify steps (compile=1), in their own mode
        pool, mode = _compiled(pool, where), None
    mode = _pick_mode(pool, mode, notes, where)
    in_mode = pool[pool["mode"] == mode]
    main, width = _pick_width(in_mode, width, notes, where)
    main = _pick_variant(main, notes)
    batch = _most_frequent(main["_batch"].dropna().astype(np.int64))

    critical, n_devices = _critical(main, notes)
    here = steps["device"].isin((critical.device, -1))
    width_pool = sweeps if len(sweeps) else in_mode
    width_times = _width_times(width_pool, mode, critical.device)
    width_moe = _width_times(width_pool, mode, critical.device, "gemm_moe")
    width_routing = _width_times(width_pool, mode, critical.device, "moe_aux")
    choice = _choice(critical, step_name, notes)
    cycle_parts = _cycle(steps, here, main[main["device"] == critical.device], critical, notes)
    graph_attr = main["attrs"].iloc[0].get("graph")
    decode_match = (
        (steps["_graph"] == graph_attr) if graph_attr is not None else (steps["mode"] == mode)
    )
    decodes = steps[(steps["_phase"] == "decode") & here & decode_match]
    cycles = cycle_parts.cycles
    accepted = cycles["_accept_len"].dropna() if cycles is not None else pd.Series(dtype=float)
    return VerifyProfile(
        verify=critical,
        width=width,
        batch=batch,
        devices=n_devices,
        draft_ms=cycle_parts.per_cycle("draft"),
        accept_ms=cycle_parts.per_cycle("accept"),
        draft_extend_ms=cycle_parts.per_cycle("draft_extend"),
        cycle_ms=float(cycles["wall_ns"].mean()) / NS_PER_MS if cycles is not None else None,
        decode_ms=float(decodes["cost_ns"].mean()) / NS_PER_MS if len(decodes) else None,
        accept_len=float(accepted.mean()) if len(accepted) else None,
        width_times=width_times,
        width_moe={w: t for w, t in width_moe.items() if t > 0},
        width_routing={w: t for w, t in width_routing.items() if t > 0},
        notes=notes,
        source=frame.source,
        draft_group=_member_group(cycle_parts.members, "draft", critical.device),
        draft_extend_group=_member_group(cycle_parts.members, "draft_extend", critical.device),
        accept_group=_member_group(cycle_parts.members, "accept", critical.device),
        cycle_group=_member_group(cycles, cycles["_phase"].iloc[0], critical.device)
        if cycles is not None
        else None,
        decode_group=_member_group(decodes, "decode", critical.device),
        choice=choice,
        calibration=graph_calibration(
            steps[here & (steps["device"] >= 0) & (steps["_phase"] != "cycle")]
        ),
        loop_derived=cycle_parts.derived and cycles is not None,
        speculative=bool(steps["_phase"].isin(SPECULATIVE_PHASES).any()) or (width or 0) > 1,
    )


def _critical(main: pd.DataFrame, notes: list[str]) -> tuple[StepGroup, int]:
    """The mean step of the slowest device (under tensor parallelism every rank waits for it),
    and how many devices ran the steps."""
    by_device = list(main.groupby("device", sort=False))
    walls = [float(rows["cost_ns"].mean()) / NS_PER_MS for _, rows in by_device]  # as StepGroup's
    slowest = max(range(len(walls)), key=walls.__getitem__)  # the first of equals, as max()
    dev, rows = by_device[slowest]
    critical = _mean_group(str(main["name"].iloc[0]), int(dev), rows)  # only its whole mean
    if len(walls) > 1:
        notes.append(
            f"{len(walls)} devices: modelling device {critical.device} (rank {critical.rank}), the"
            f" slowest ({critical.wall_ms:.3f} ms vs fastest {min(walls):.3f} ms)"
        )
    return critical, len(walls)


def _width_times(
    pool: pd.DataFrame, mode: str, device: int, column: str = "cost_ns"
) -> dict[int, float]:
    """Measured verify ms per width (the width sweep's steps when there are, of this mode): the
    whole step's, or one phase's ``column``."""
    pool = pool[(pool["mode"] == mode) & pool["device"].isin((device, -1))]
    if column not in pool.columns:
        return {}
    return {int(w): float(v) / NS_PER_MS for w, v in pool.groupby("_width")[column].mean().items()}


def _choice(group: StepGroup, step_name: str | None, notes: list[str]) -> str:
    """The modelled group in words, and why it: --step, the only verify group, or the picks."""
    label = variant(group.attrs)
    what = f"{group.name}" + (f" [{label}]" if label else "") + f", {counted(group.steps, 'step')}"
    why = [n for n in notes if n.startswith(("verify steps", "width ", "whole-trace"))]
    if step_name is not None:
        why.insert(0, f"the steps named {step_name!r} (--step)")
    return what + ": " + ("; ".join(why) if why else "the trace's only verify group")


def _member_group(members: pd.DataFrame, phase: str, device: int) -> StepGroup | None:
    rows = members[(members["_phase"] == phase) & (members["device"] == device)]
    return _mean_group(str(_most_frequent(rows["name"])), device, rows) if len(rows) else None


def _is_verify(names: pd.Series) -> pd.Series:
    """verifyprof's verify ranges, SGLang's TARGET_VERIFY spans and user ranges named verify."""
    verdict = {name: is_phase(name, "verify") for name in names.unique()}  # a handful of step names
    return names.map(verdict).astype(bool)


def _most_frequent(values: pd.Series) -> int | str | None:
    """The most frequent value; ties go to the first in sorted order (deterministic)."""
    if values.empty:
        return None
    counts = values.value_counts()
    best = counts[counts == counts.max()].index
    value = sorted(best.tolist())[0]
    return int(value) if isinstance(value, (int, np.integer)) else value


# ---- picking the modelled steps ------------------------------------------------------------


def _chosen_steps(
    steps: pd.DataFrame, step_name: str | None, notes: list[str], where: str | None
) -> pd.DataFrame:
    names = sorted(steps["name"].unique().tolist())
    if step_name is not None:
        chosen = steps[steps["name"] == step_name]
        if chosen.empty:
            raise NoStepsError(
                f"no steps named {step_name!r} in the breakdown (it has: {', '.join(names)})", where
            )
    else:
        chosen = steps[_is_verify(steps["name"])]
        if chosen.empty and names == [WHOLE_TRACE]:
            chosen = steps
            notes.append("whole-trace breakdown: the whole trace is modelled as one verify step")
        if chosen.empty:
            raise NoStepsError(
                f"breakdown has no verify steps ({VERIFY} or TARGET_VERIFY); it has:"
                f" {', '.join(names)} (pick one with --step NAME)",
                where,
            )
    on_gpu = chosen[chosen["device"] >= 0]
    return on_gpu if len(on_gpu) else chosen


def _only_swept(chosen: pd.DataFrame, width: int | None, notes: list[str]) -> bool:
    """Whether only the width sweep's steps (sweep=1) have the width asked for: then they are
    modelled."""
    if width is None:
        return False
    is_sweep = chosen["_sweep"].to_numpy()
    loop, swept = chosen["_width"][~is_sweep], chosen["_width"][is_sweep]
    if only := not (loop == width).any() and (swept == width).any():
        notes.append(
            f"width {width}: only the width sweep's verify steps (sweep=1) have it; modelling those"
            f" (the main loop has widths {sorted(set(loop.dropna().astype(np.int64).tolist()))})"
        )
    return bool(only)


def _split_sweep(
    chosen: pd.DataFrame, sweep: bool, where: str | None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the steps modelled, the width-sweep steps)."""
    is_sweep = chosen["_sweep"].to_numpy()
    sweeps = chosen[is_sweep]
    if sweep:
        if sweeps.empty:
            raise NoStepsError("breakdown has no width-sweep verify steps (sweep=1)", where)
        return sweeps, sweeps
    loop = chosen[~is_sweep]
    return (loop if len(loop) else chosen), sweeps


def _pick_mode(pool: pd.DataFrame, mode: str | None, notes: list[str], where: str | None) -> str:
    modes = sorted(pool["mode"].unique().tolist())
    if mode is None:
        mode = str(_most_frequent(pool["mode"]))
        if len(modes) > 1:
            notes.append(
                f"verify steps run in several modes {modes}: modelling the most frequent, {mode}"
                " (pick with --mode)"
            )
    if not (pool["mode"] == mode).any():
        raise NoStepsError(f"no verify steps in {mode} mode (the breakdown has {modes})", where)
    return mode


def _pick_width(
    in_mode: pd.DataFrame, width: int | None, notes: list[str], where: str | None
) -> tuple[pd.DataFrame, int | None]:
    known = in_mode["_width"].dropna().astype(np.int64)
    if width is None and len(known):
        width = int(_most_frequent(known))
        if known.nunique() > 1:
            notes.append(
                f"verify steps of several widths {sorted(set(known.tolist()))}: modelling the most"
                f" frequent, {width} (pick with --width)"
            )
    main = in_mode[in_mode["_width"] == width] if width is not None and len(known) else in_mode
    if main.empty:
        raise NoStepsError(
            f"no verify steps of width {width} (the breakdown has widths"
            f" {sorted(set(known.tolist()))})",
            where,
        )
    return main, width


def _compiled(in_mode: pd.DataFrame, where: str | None) -> pd.DataFrame:
    """The verify steps of a torch.compile run (attribute compile=1): the cycle around them,
    draft steps included, is found as for any verify."""
    marked = in_mode["attrs"].map(lambda a: str(a.get("compile", "0")) not in ("0", ""))
    if not marked.any():
        raise NoStepsError("no compiled verify steps (no verify range carries compile=1)", where)
    return in_mode[marked]


def _pick_variant(main: pd.DataFrame, notes: list[str]) -> pd.DataFrame:
    """One configuration of the verify (e.g. graph vs torch.compile'd graph at the same width):
    steps whose attributes differ are different measurements, never averaged into one."""
    kinds = main["attrs"].map(variant)
    if kinds.nunique() <= 1:
        return main
    chosen = str(_most_frequent(kinds))
    others = sorted(set(kinds) - {chosen})
    notes.append(
        f"verify steps of several configurations: modelling [{chosen}]"
        f" ({int((kinds == chosen).sum())} steps), not {', '.join(f'[{o}]' for o in others)}"
        + (" (--mode compile selects the compiled run)" if _any_compiled(others) else "")
    )
    return main[kinds == chosen]


def _any_compiled(variants: list[str]) -> bool:
    return any("compile=" in v and "compile=0" not in v for v in variants)


def _mean_group(name: str, device: int, rows: pd.DataFrame) -> StepGroup:
    has_comm = all(c in rows.columns for c in COMM_COLUMNS)
    kept = [p for p in phases.ALL if p not in phases.OTHER]
    m = _column_means(
        rows,
        [
            "cost_ns", "gpu_span_ns", "kernels", "launches", "graph_launches", "wall_ns",
            "other_work", *kept, *(f"total_{p}" for p in phases.TOTALS),
            *(f"count_{p}" for p in phases.PRIORITY), *(COMM_COLUMNS if has_comm else ()),
        ],
    )  # fmt: skip
    return StepGroup(
        name=name,
        device=device,
        rank=int(rows["rank"].iloc[0]),
        steps=len(rows),
        mode=str(_most_frequent(rows["mode"])),
        wall_ms=m["cost_ns"] / NS_PER_MS,
        gpu_span_ms=m["gpu_span_ns"] / NS_PER_MS,
        phases_ms={p: m[p] / NS_PER_MS for p in kept},
        totals_ms={p: m[f"total_{p}"] / NS_PER_MS for p in phases.TOTALS},
        kernels=m["kernels"],
        launches=m["launches"],
        graph_launches=m["graph_launches"],
        comm_calls=m["comm_calls"] if has_comm else None,
        comm_wait_ms=m["comm_wait_ns"] / NS_PER_MS if has_comm else None,
        counts={p: m[f"count_{p}"] for p in phases.PRIORITY},
        attrs=dict(rows["attrs"].iloc[0]),
        window_ms=m["wall_ns"] / NS_PER_MS,
        other_work_ms=m["other_work"] / NS_PER_MS,
        **_host_sync_fields(rows),
    )


def _column_means(rows: pd.DataFrame, names: list[str]) -> dict[str, float]:
    """``float(rows[c].mean())`` of each column, bit for bit, without a Series per column: pandas
    sums an int64 column's contiguous values as float64, then divides by the count; each row of
    the transposed block is summed alone, as such a column is."""
    names = list(dict.fromkeys(names))
    if len(rows) and (rows.dtypes[names] == np.dtype(np.int64)).all():
        block = np.ascontiguousarray(rows[names].to_numpy(np.int64).T)
        count = np.float64(len(rows))
        return {c: float(values.sum(dtype=np.float64) / count) for c, values in zip(names, block)}
    return {c: float(rows[c].mean()) for c in names}


def _host_sync_fields(rows: pd.DataFrame) -> dict[str, float]:
    """Syncs per step and the idle after them (0 for breakdowns made before they were counted),
    and how much the kernel count varies from step to step (dynamic shapes, data-dependent
    routing: what a graph cannot capture)."""
    kernels = rows["kernels"].to_numpy(dtype=float)
    mean = float(kernels.mean()) if len(kernels) else 0.0
    out = {"kernels_cv": float(kernels.std()) / mean if mean > 0 else 0.0}
    if "host_syncs" in rows.columns:
        out["host_syncs"] = float(rows["host_syncs"].mean())
        out["post_sync_ms"] = float(rows["post_sync_ns"].mean()) / NS_PER_MS
    return out
