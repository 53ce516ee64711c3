"""A capture manifest's ``dilation`` record, read into its :class:`Manifest`: the factor, the
rates on a request's basis (a batched program reports its batch's), the baseline runs, the
program's per-sample rates and the unprofiled run's own plain decoding. It fills the fields of
the ``Manifest`` it is handed (typed ``Any``: this module is below the one that defines it)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from verifyprof.contracts.bounds import manifest_number, positive_numbers
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.plumbing.inputs import MANIFEST_LIMIT, parse_json, read_bytes

ROUNDING = 0.99  # a per-request rate this close to the total is the same rate, rounded (batch 1)
# a first per-sample rate this far under the median of the rest is a cold start; a median of fewer
# warm samples than SETTLED may be under the settled rate: a batched gpt-fast at batch 16 ran 78,
# 191, 170, 182, 189, 198 and 134, 176, 167, 180, 188, 194 tok/s in two processes (its first two
# warm samples 2-7% under the five's median), and a capture of three samples (124, 149, 156)
# anchored it 13.5% under its sweep, its two warm ones alone 12% (bench/README.md, B5): more
# samples narrow such a gap, and need not close it
COLD_BELOW, SETTLED = 0.9, 5


def starts_cold_unsettled(samples: Any) -> bool:
    """Whether per-sample rates start with a cold sample (under :data:`COLD_BELOW` of the rest's
    median) and fewer than :data:`SETTLED` warm ones follow it: their median may be unsettled."""
    rates = positive_numbers(samples or [])
    if len(rates) < 2 or len(rates) - 1 >= SETTLED:
        return False
    return rates[0] < COLD_BELOW * statistics.median(rates[1:])


def median_error(rates: tuple[float, ...] | list[float]) -> float:
    """The relative standard error of the median of ``rates`` (1.2533 x the MAD-based sigma over
    sqrt(n), over the median), 0 under three: how far an anchor that is such a median may lie
    from the program's settled rate. Program B's six unprofiled samples a capture gave 11-16%,
    where a measured point's band was 4% (bench/README.md, B6)."""
    values = positive_numbers(rates)
    if len(values) < 3:
        return 0.0
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    return 1.2533 * 1.4826 * mad / med / math.sqrt(len(values))


def _per_request_scale(manifest: Any, dilation: dict) -> float:
    """A request's share of the rates a ``tokens_per_s`` dilation record holds: the profiled run's
    ``tokens_per_s_per_request`` over its ``tokens_per_s`` where it reported both and they differ
    (a batched program's aggregate), else 1. A record on the per-request basis is kept as is."""
    if dilation.get("basis", "tokens_per_s") != "tokens_per_s":
        return 1.0
    results = manifest.raw.get("results") if isinstance(manifest.raw, dict) else None
    if not isinstance(results, dict):
        return 1.0
    total = positive_numbers(results.get("tokens_per_s"))
    each = positive_numbers(results.get("tokens_per_s_per_request"))
    if not total or not each or each[0] / total[0] > ROUNDING:
        return 1.0
    return each[0] / total[0]


def with_dilation(manifest: Any, dilation: Any) -> Any:
    """The manifest's ``dilation`` record, if it has a measured factor (checked like the rest)."""
    if not isinstance(dilation, dict) or dilation.get("factor") is None:
        return manifest
    factor, unprofiled = dilation.get("factor"), dilation.get("unprofiled_tokens_per_s")
    for name, value in (
        ("dilation.factor", factor),
        ("dilation.unprofiled_tokens_per_s", unprofiled),
    ):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0
        ):
            raise VerifyprofError(
                f"manifest field {name!r} is not a positive number: {value!r}", manifest.path
            )
        manifest_number(name, value, manifest.path)  # finite, in its range
    manifest.dilation = float(factor)
    scale = manifest.rate_scale = _per_request_scale(manifest, dilation)
    manifest.unprofiled_tps = float(unprofiled) * scale if unprofiled is not None else None
    manifest.dilation_source = str(dilation.get("source") or "")
    profiled = dilation.get("profiled_tokens_per_s")
    if isinstance(profiled, (int, float)) and not isinstance(profiled, bool) and profiled > 0:
        manifest.profiled_tps = scale * float(
            manifest_number("dilation.profiled_tokens_per_s", profiled, manifest.path)
        )
    samples = dilation.get("samples")
    if isinstance(samples, dict):
        pair = [positive_numbers(samples.get(k) or []) for k in ("profiled", "unprofiled")]
        manifest.dilation_samples = (pair[0], pair[1]) if all(pair) else None
    runs = dilation.get("baseline_runs_tokens_per_s")
    if isinstance(runs, list):
        manifest.dilation_runs = tuple(v * scale for v in positive_numbers(runs))
    plain = dilation.get("unprofiled_baseline_tokens_per_s")
    if plain is None and manifest.dilation_source == "baseline run":
        plain = _baseline_run_plain(manifest.path)
    if isinstance(plain, (int, float)) and not isinstance(plain, bool) and plain > 0:
        manifest.unprofiled_baseline_tps = float(
            manifest_number("dilation.unprofiled_baseline_tokens_per_s", plain, manifest.path)
        )
    return manifest


def _baseline_run_plain(path: Path) -> Any:
    """The unprofiled baseline run's own plain-decoding rate, from ``baseline/results.json``
    beside a manifest written before the dilation record carried it; None where there is none
    (an unreadable or odd file is no rate: the profiled one is then raced, as the notes say)."""
    results = path.parent / "baseline" / "results.json"
    if not results.is_file():
        return None
    try:
        data = parse_json(
            read_bytes(results, "baseline results", MANIFEST_LIMIT), "baseline results", results
        )
    except (VerifyprofError, ValueError):
        return None
    return data.get("baseline_tokens_per_s") if isinstance(data, dict) else None
