"""Speculate or not at every load: the draft-count curve at each batch size and context length,
the batch above which speculation stops paying, and where the verify crosses the ridge point.

At one batch, more drafts pay while the verify over k+1 tokens costs about what one token costs
(it reads the weights once). Batching spends the same headroom: a batch of B requests verifying
k+1 tokens each is a forward over B(k+1) tokens, and past the hardware's ridge point (peak FLOPs
/ bandwidth) every token costs FLOPs. So the best k falls as the batch grows, until plain
decoding (k = 0, B tokens a forward) wins. Attention goes the other way: every request reads its
own KV cache whatever the width, so a longer context makes the step bandwidth-bound again and
speculation pays to a larger batch.

Each point starts from the draft-count curve's state at k drafts (today's batch: the same numbers
as ``draft_curve``) and moves its verify to the batch and context by the roofline
(:mod:`verifyprof.model.fixes.batch`). Per-request acceptance does not change with the batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verifyprof.model.cycle.phase_fit import worst
from verifyprof.model.cycle.width_fit import WidthFit
from verifyprof.model.decision.load_defaults import (
    _first_bound,
    acceptance_shape,
    curve_notes,
    default_batches,
    default_contexts,
    fits,
    load_skip,
    ridge_json,
    too_big_note,
)
from verifyprof.model.decision.load_points import (
    measured_point,
    rate_band,
    roofline_point,
    roofline_states,
)
from verifyprof.model.decision.load_row import Row
from verifyprof.model.decision.measure_commands import capture_command
from verifyprof.model.fixes.base import Scenario, Skip
from verifyprof.model.fixes.batch import PartSlope, token_fit
from verifyprof.model.fixes.draft import _num_draft
from verifyprof.model.inputs.profile import VerifyProfile

CURVE_MIN_K, CURVE_PAST = 8, 4  # as the draft-count curve


@dataclass
class ContextCurve:
    context: float
    rows: list[Row]
    ridge_batch: dict[int, int | None]  # k -> first listed batch whose verify is compute-bound
    measured: tuple[tuple[int, float], ...] = ()  # the captures' (batch, context)
    server: bool = False  # an SGLang server's: capture --concurrency measures another load
    program: tuple[str, ...] | None = None  # the captures' command, its batch as {batch}
    source: str | None = None  # the capture that recorded it, for capture --again

    @property
    def stops_paying_at(self) -> int | None:
        """The first listed batch from which plain decoding wins at every larger listed batch
        (None: speculation still pays at the largest, or no plain decoding to compare)."""
        if not self.rows or self.rows[-1].plain is None or self.rows[-1].best["num_draft"]:
            return None
        at = self.rows[-1].batch
        for row in reversed(self.rows):
            if row.best["num_draft"]:
                break
            at = row.batch
        return at

    @property
    def summary(self) -> str:
        """The curve's answer in words, true of every row: speculation pays at every batch
        listed only when it does at each; else the ranges."""
        judged = [r for r in self.rows if r.plain is not None]
        if not judged:
            return "no plain decoding to compare with"
        pays = [r.best["num_draft"] > 0 for r in judged]
        if all(pays):
            return f"speculation pays at every batch listed (1-{judged[-1].batch})"
        if not any(pays):
            return "plain decoding is faster at every batch listed"
        spans = [
            f"{'speculation' if k else 'plain decoding'} at batch {a}-{b}"
            + (f" (k = {k})" if k else "")
            for a, b, k in self.ranges()
        ]
        return "; ".join(spans)

    @property
    def extrapolated_from(self) -> int | None:
        """The first listed batch past every captured batch of this context (or every batch,
        where no capture has this context) whose answer rests on no measured point."""
        here = [b for b, c in self.measured if c == self.context]
        top = max(here) if here else 0
        return next(
            (
                r.batch
                for r in self.rows
                if r.batch > top and r.basis not in ("measured", "interpolated")
            ),
            None,
        )

    @property
    def unmeasured_k(self) -> list[int]:
        """Best draft counts past every captured one (their draft and verify extrapolated)."""
        ks = {
            p.get("num_draft") for r in self.rows for p in r.points if p.get("basis") == "measured"
        }
        top = max(ks, default=0)
        return sorted({r.best["num_draft"] for r in self.rows if r.best["num_draft"] > top})

    @property
    def basis_words(self) -> str | None:
        """Where the rows' answer stops resting on measurements, and the capture that would
        measure it (None: every row is measured or interpolated)."""
        at = self.extrapolated_from
        if at is None:
            return None
        bands = [rate_band(r.best) or 0.0 for r in self.rows if r.batch >= at]  # rates' own
        here = sorted(b for b, c in self.measured if c == self.context)
        where = (
            f"measured at batch {', '.join(map(str, here))} of this context"
            if here
            else "no capture at this context"
        )
        band = (
            f"band up to +/-{max(bands):.0%}"
            if max(bands, default=0.0) > 0
            else "the roofline's, with no band: nothing measured it"
        )
        return (
            f"rows from batch {at} on are extrapolated ({band}; {where});"
            " the best k and where speculation stops paying there rest on them; this capture"
            " measures them:"
        )

    @property
    def measure_command(self) -> str | None:
        """The capture that measures the extrapolated rows (a server's, or the program's own)."""
        if self.extrapolated_from is None:
            return None
        top = self.rows[-1].batch
        here = any(c == self.context for _, c in self.measured)
        loads = f"{top}" if here else f"{self.rows[0].batch},{top}"
        at = "" if here else f" (at context {self.context:g})"
        if self.server:
            return f'verifyprof capture --server-cmd "..." --concurrency {loads}{at}'
        say = not here or len({c for _, c in self.measured}) > 1  # several: say which context
        return capture_command(self.program, loads, self.context, say, self.source)

    def measure_range(self, first: int, last: int) -> str:
        """The capture that measures a load range: its first and last batch (a server at those
        concurrencies, a program at those batches), at this context."""
        loads = f"{first},{last}" if last != first else f"{first}"
        if self.server:
            return f'verifyprof capture --server-cmd "..." --concurrency {loads}'
        elsewhere = self.context not in {c for _, c in self.measured}
        return capture_command(self.program, loads, self.context, elsewhere, self.source)

    @property
    def k_words(self) -> str | None:
        """Best draft counts no capture measured, and the capture that would."""
        ks = self.unmeasured_k
        if not ks:
            return None
        return (
            f"best k {', '.join(map(str, ks))} lies past the captured draft counts (its draft and"
            f" verify extrapolated): a capture with {ks[-1]} drafts measures it"
        )

    @property
    def pays_up_to(self) -> int | None:
        """The largest listed batch at which speculation beats plain decoding."""
        paying = [r.batch for r in self.rows if r.plain is not None and r.best["num_draft"]]
        return max(paying) if paying else None

    def range_basis(self, first: int, last: int) -> dict[str, Any]:
        """What a load range's setting rests on: the least confident basis of its rows and
        their widest band."""
        rows = [r for r in self.rows if first <= r.batch <= last]
        return {
            "basis": worst(*(r.basis for r in rows)),
            "band": max((r.best.get("band") or 0.0 for r in rows), default=0.0),
        }

    def ranges(self) -> list[tuple[int, int, int]]:
        """(first batch, last batch, k): consecutive listed batches that one k serves within
        their bands (the k of their best sets' common part with the highest summed rate), so a
        setting switches k only where the model can tell the rates apart; a range starts after
        the previous one's last batch (the first at 1)."""
        groups: list[tuple[list[Row], set[int]]] = []
        for row in self.rows:  # speculate or not is the best point's; k within the band
            best = row.best["num_draft"]
            ks = (set(row.best_set) - {0}) or {best} if best else {0}
            if groups and groups[-1][1] & ks:
                groups[-1][0].append(row)
                groups[-1] = (groups[-1][0], groups[-1][1] & ks)
            else:
                groups.append(([row], ks))
        out, start = [], 1
        for rows, ks in groups:
            k = max(sorted(ks), key=lambda k: sum(_rate(r, k) for r in rows))
            out.append((start, rows[-1].batch, k))
            start = rows[-1].batch + 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "context": self.context,
            "stops_paying_at_batch": self.stops_paying_at,
            "pays_up_to_batch": self.pays_up_to,
            "verify_compute_bound_from_batch": {str(k): b for k, b in self.ridge_batch.items()},
            "ranges": [list(r) for r in self.ranges()],
            "range_basis": [
                {"batches": [a, b], "k": k, **self.range_basis(a, b)} for a, b, k in self.ranges()
            ],
            "summary": self.summary,
            "extrapolated_from_batch": self.extrapolated_from,
            "basis_words": self.basis_words,
            "measure_command": self.measure_command,
            "k_words": self.k_words,
            "rows": [r.to_json() for r in self.rows],
        }


@dataclass
class LoadCurve:
    curves: list[ContextCurve]
    today_batch: int
    today_context: float
    current_k: int
    acceptance: dict[str, Any]
    ridge: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    sglang: bool = False
    server: dict[str, Any] = field(default_factory=dict)  # filled by decision.server_flags
    moe_union: dict[str, Any] | None = None  # the experts touched the MoE GEMM moves by
    # no capture states its context: the assumption its rows rest on, in words (issue 41)
    context_assumed: str | None = None

    def assume_context(self, words: str) -> None:
        """Every row rests on a context no capture states (marked ``assumed``)."""
        self.context_assumed = words
        for curve in self.curves:
            for row in curve.rows:
                row.assumes = "context"

    def to_json(self) -> dict[str, Any]:
        union = {} if self.moe_union is None else {"moe_union": self.moe_union}
        out = union | {
            "today": {
                "batch": self.today_batch,
                "context": self.today_context,
                "num_draft": self.current_k,
            },
            "acceptance": self.acceptance,
            "ridge": self.ridge,
            "contexts": [c.to_json() for c in self.curves],
            "server_settings": self.server,
            "notes": self.notes,
        }
        return out | ({"context_assumed": self.context_assumed} if self.context_assumed else {})


def load_curve(
    profile: VerifyProfile,
    s: Scenario,
    batches: tuple[int, ...] | None = None,
    contexts: tuple[float, ...] | None = None,
    ks: tuple[int, ...] | None = None,
    slopes: tuple[PartSlope, ...] = (),
    fit: WidthFit | None = None,
) -> LoadCurve:
    """The draft-count curve at every batch and context (``s`` must carry a model config and a
    hardware file: :func:`load_skip` says why not)."""
    k0 = _num_draft(profile, s)
    if not k0 or not s.speculating:
        raise Skip("no speculative cycle to move (plain decoding, or the draft count unknown)")
    if s.model is None or s.hardware is None:
        raise Skip(load_skip(s))
    top = max(CURVE_MIN_K, k0 + CURVE_PAST)
    ks = tuple(sorted(set(ks))) if ks else tuple(range(top + 1))
    contexts = contexts or default_contexts(s.context)
    batches = tuple(sorted(set(batches or default_batches(s, max(contexts), top + 1))))
    if s.measured is not None:
        batches = tuple(sorted({*batches, *s.measured.batches}))
    if fit is None and s.use_measured_widths:
        fit = token_fit(profile, s.batch)
    notes = curve_notes(s, slopes, fit)
    states = roofline_states(profile, s, k0, ks, notes) if s.measured is None else []
    cache: dict = {}
    curves = []
    for context in contexts:
        rows = []
        fitting, too_big = fits(s, batches, context, top + 1)
        if too_big:
            notes.append(too_big_note(s, too_big, context))
        if not fitting:
            continue
        for batch in fitting:
            if s.measured is not None:
                found = (measured_point(s.measured, k, batch, context, cache) for k in ks)
                points = [p for p in found if p is not None]
            else:
                points = [roofline_point(st, batch, context, slopes, fit) for st in states]
            rows.append(Row(batch, points))
        ridge = {k: _first_bound(s, fitting, k + 1) for k in ks}
        program = (s.sglang, s.program_template, s.program_source)  # what measures it
        curves.append(ContextCurve(float(context), rows, ridge, _measured_at(s), *program))
    if not curves:  # no load given can run: no curve to show, only why
        raise Skip("no load curve: " + "; ".join(n for n in notes if "no rate given" in n))
    n0 = profile.width or k0 + 1
    return LoadCurve(
        curves,
        s.batch,
        s.context,
        k0,
        acceptance_shape(n0, k0),
        ridge_json(s),
        notes,
        s.sglang,
        moe_union=_union_json(s),
    )


def _union_json(s: Scenario) -> dict[str, Any] | None:
    """The MoE GEMM's union (fitted, or the model file's where one token count was captured)."""
    u = s.measured.union_fit(s.model) if s.measured is not None else None
    return None if u is None else u.to_json() | {"used": s.measured.moe_union(s.model) is not None}


def _rate(row: Row, k: int) -> float:
    return row.rates.get(k, 0.0)


def _measured_at(s: Scenario) -> tuple[tuple[int, float], ...]:
    if s.measured is None:
        return ((s.batch, float(s.context)),)
    return tuple(sorted({(c.batch, c.context) for c in s.measured.captures}))
