"""Every measured rate that anchors the model, side by side (issue 42): the unprofiled baseline
runs (``--baseline-run``), the profiled process's own unprofiled calls (its results'
``unprofiled_tokens_per_s``), ``--decode-cmd``'s runs and the baseline run's own plain decoding.
Each is shown with n, median and spread (vLLM #49163 tunes k by a median with a MAD penalty);
a baseline that disagrees with the program's own unprofiled calls by more than their spread is
flagged and never used alone: the anchor is then the median of the sources that agree with
those calls (a gpt-fast capture's one baseline run made 248 tok/s where its own calls in the
profiled process made 203.5 and 205.2, and two sweep processes 205.1 and 211.5)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from verifyprof.contracts.bounds import positive_numbers
from verifyprof.contracts.manifest import Manifest
from verifyprof.contracts.manifest_dilation import SETTLED, starts_cold_unsettled

# the least disagreement flagged: one call has no spread, two close calls almost none, and a
# host's processes differ by a few percent (bench/README: 2-4% between H200 sessions)
MIN_SPREAD = 0.03
UNSETTLED = (
    f"the unprofiled baseline's per-sample rates start cold and fewer than {SETTLED} warm samples"
    " follow: a program that starts cold can take several samples to settle, so the anchor may"
    f" be under its settled rate; run {SETTLED + 1} or more samples (--details: each capture's"
    " samples)"
)
SPECULATING, PLAIN = "speculating", "plain decoding"
BASELINE = "baseline runs (--baseline-run, unprofiled)"
SAMPLES = "the baseline run's per-sample rates (--baseline-run, unprofiled)"
OWN_CALLS = "the profiled process's own unprofiled calls"


@dataclass(frozen=True)
class RateSource:
    """One source's measured rates (tok/s per request) of one thing (speculating or plain)."""

    what: str  # SPECULATING | PLAIN
    source: str
    runs: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.runs)

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    @property
    def spread(self) -> float:
        """(max - min) / median: 0 for one run."""
        return (max(self.runs) - min(self.runs)) / self.median if self.n > 1 else 0.0

    def words(self) -> str:
        runs = ", ".join(f"{r:,.1f}" for r in self.runs)
        return (
            f"{self.what}, {self.source}: n={self.n}, median {self.median:,.1f} tok/s, spread"
            f" {self.spread:.1%} ({runs})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "source": self.source,
            "n": self.n,
            "median_tokens_per_s": self.median,
            "spread": self.spread,
            "runs_tokens_per_s": list(self.runs),
        }


@dataclass(frozen=True)
class Rates:
    """The sources, and where the baseline disagrees: the rate used instead and the warning."""

    sources: tuple[RateSource, ...] = ()
    unprofiled_tps: float | None = None  # the speculating anchor where the baseline is flagged
    runs: tuple[float, ...] = ()  # the agreeing runs it is the median of
    warning: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "sources": [s.to_json() for s in self.sources],
            "baseline_flagged": self.unprofiled_tps is not None,
            **({"anchor_tokens_per_s": self.unprofiled_tps} if self.unprofiled_tps else {}),
            **({"warning": self.warning} if self.warning else {}),
        }


def rate_sources(manifest: Manifest | None) -> list[RateSource]:
    """Every anchoring rate the capture measured, by source."""
    if manifest is None:
        return []
    raw = manifest.raw if isinstance(manifest.raw, dict) else {}
    results = raw.get("results") if isinstance(raw.get("results"), dict) else {}
    dilation = raw.get("dilation") if isinstance(raw.get("dilation"), dict) else {}
    out = []
    scale = manifest.rate_scale  # a batched program's aggregate rates, per request
    if manifest.dilation_source == "baseline run":
        runs = manifest.dilation_runs or tuple(
            r * scale for r in positive_numbers(dilation.get("unprofiled_tokens_per_s"))
        )
        if runs:
            out.append(RateSource(SPECULATING, BASELINE, runs))
        elif manifest.dilation_samples:  # one run: its samples, whose median the anchor is
            samples = tuple(r * scale for r in manifest.dilation_samples[1])
            out.append(RateSource(SPECULATING, SAMPLES, samples))
        elif manifest.unprofiled_tps:  # one run of one rate
            out.append(RateSource(SPECULATING, BASELINE, (manifest.unprofiled_tps,)))
    own = tuple(r * scale for r in positive_numbers(results.get("unprofiled_tokens_per_s")))
    if own:
        out.append(RateSource(SPECULATING, OWN_CALLS, own))
    source = str(results.get("baseline_source") or "")
    decode = positive_numbers(results.get("baseline_tokens_per_s"))
    if decode and source.startswith("--decode-cmd"):
        out.append(RateSource(PLAIN, "--decode-cmd runs (unprofiled)", decode))
    if manifest.unprofiled_baseline_tps:
        plain = (manifest.unprofiled_baseline_tps,)
        out.append(RateSource(PLAIN, "the baseline run's own plain decoding", plain))
    return out


def robust_rates(manifest: Manifest | None) -> Rates:
    """The sources, with the baseline checked against the program's own unprofiled calls: where
    it is off by more than their spread (at least :data:`MIN_SPREAD`), the speculating anchor is
    the median of the runs of every source that agrees with those calls."""
    sources = rate_sources(manifest)
    own = next((s for s in sources if s.source == OWN_CALLS), None)
    base = next((s for s in sources if s.source in (BASELINE, SAMPLES)), None)
    if own is None or base is None:
        return Rates(tuple(sources), warning=_plain_apart(sources))
    tolerance = max(own.spread, MIN_SPREAD)
    off = base.median / own.median - 1
    if abs(off) <= tolerance:
        return Rates(tuple(sources), warning=_plain_apart(sources))
    agreeing = [
        s for s in sources if s.what == SPECULATING and abs(s.median / own.median - 1) <= tolerance
    ]
    runs = tuple(r for s in agreeing for r in s.runs)
    rate = statistics.median(runs)
    warning = (
        f"the baseline runs ({base.median:,.1f} tok/s, n={base.n}) disagree with the profiled"
        f" process's own unprofiled calls ({own.median:,.1f} tok/s, n={own.n}, spread"
        f" {own.spread:.1%}) by {off:+.0%}: not used alone; the anchor is {rate:,.1f} tok/s,"
        f" the median of the {len(runs)} agreeing runs"
    )
    return Rates(tuple(sources), rate, runs, warning)


def unsettled(manifest: Manifest | None) -> str | None:
    """:data:`UNSETTLED` where the baseline's unprofiled per-sample rates start with a cold sample
    (``contracts.manifest_dilation``: under 0.9x the rest's median) and fewer than five follow it.
    The words carry no numbers, so several captures that say it say it once."""
    samples = manifest.dilation_samples if manifest is not None else None
    return UNSETTLED if samples and starts_cold_unsettled(samples[1]) else None


def _plain_apart(sources: list[RateSource]) -> str | None:
    """One warning where plain decoding's measured rates (--decode-cmd's runs, the baseline
    run's own) disagree by more than their spread (at least :data:`MIN_SPREAD`)."""
    plain = [s for s in sources if s.what == PLAIN]
    if len(plain) < 2:
        return None
    a, b = plain[0], plain[1]
    off = a.median / b.median - 1
    if abs(off) <= max(a.spread, b.spread, MIN_SPREAD):
        return None
    return (
        f"plain decoding's measured rates disagree: {a.source} {a.median:,.1f} tok/s (n={a.n})"
        f" against {b.source} {b.median:,.1f} (n={b.n}), {off:+.0%}: measure it again before"
        " relying on the race with plain decoding"
    )
