"""The documented range of every number verifyprof takes in, in one place: command-line options,
the capture manifest's fields and what a program reports in its ``results.json``.

A number is refused, in one line naming the option or field, when it is not finite (NaN and
infinity are never an input: NaN is not even JSON) or outside its range. The ranges keep every
result finite: an accept length of 1e308 would otherwise give ``inf tok/s``, a verify time of
1e-320 ms an infinite rate, and ``--gate nan`` a gate that never fails.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifyprof.contracts.errors import VerifyprofError

MAX_DRAFTS = 256  # draft tokens per cycle (servers verify at most a few dozen)
MAX_COUNT = 1 << 20  # batch, widths, tp: bounds that keep every model loop and array small
TOP_KERNELS = 30  # kernels listed by default: ``kernels --top`` and the report's top-kernels table


@dataclass(frozen=True)
class Bound:
    """``low <= value <= high`` (``low < value`` when ``low_open``), ``unit`` after the numbers."""

    low: float
    high: float
    unit: str = ""
    low_open: bool = False
    integer: bool = False
    positive: bool = False  # ``low`` is a resolution floor: a value <= 0 "must be positive"
    why: str = ""  # said after the range when the value is out of it

    def words(self) -> str:
        low = f"> {self.low:g}" if self.low_open else f"{self.low:g}"
        return f"{low} to {self.high:g}{self.unit}"


ACCEPT_LEN = Bound(
    1.0, MAX_DRAFTS + 1.0, why="it counts the bonus token: 1 to 257 tokens per verify step"
)
STEP_MS = Bound(1e-6, 3.6e6, " ms", positive=True, why="1 ns to 1 hour")  # a verify or decode step
PART_MS = Bound(0.0, 3.6e6, " ms", why="at most 1 hour")  # draft, overhead: may be 0
TOKENS_PER_S = Bound(1e-3, 1e9, " tok/s", positive=True)
MEASURED_TOKENS_PER_S = Bound(0.0, 1e9, " tok/s")  # what a run measured: 0 when nothing completed
RATIO = Bound(0.0, 100.0)  # draft step / target step
CONTEXT = Bound(0.0, 1e9, " tokens")
DRAFTER_GAIN = Bound(0.0, float(MAX_DRAFTS), " tokens")
GATE_PCT = Bound(-100.0, 1e6, " %", why="percent slower; -100 is every millisecond gone")
NUM_DRAFT = Bound(1, MAX_DRAFTS, integer=True)
WORKERS = Bound(1, 4096, integer=True)
DILATION = Bound(0.0, 1e6, low_open=True)
PROBABILITY = Bound(0.0, 1.0)

# Command-line options (the CLI checks those it was given before any work).
OPTIONS: dict[str, Bound] = {
    "--accept-len": ACCEPT_LEN,
    "--verify-ms": STEP_MS,
    "--decode-ms": STEP_MS,
    "--draft-ms": PART_MS,
    "--overhead-ms": PART_MS,
    "--baseline-tps": TOKENS_PER_S,
    "--draft-cost-ratio": RATIO,
    "--context": CONTEXT,
    "--drafter-gain": DRAFTER_GAIN,
    "--gate": GATE_PCT,
    "--num-draft": NUM_DRAFT,
    "--workers": WORKERS,
}
# ``WhatifOptions`` attribute -> its option: the model checks them (also for API callers).
WHATIF_FIELDS = {
    "verify_ms": "--verify-ms",
    "accept_len": "--accept-len",
    "decode_ms": "--decode-ms",
    "draft_ms": "--draft-ms",
    "overhead_ms": "--overhead-ms",
    "baseline_tps": "--baseline-tps",
    "draft_cost_ratio": "--draft-cost-ratio",
    "context": "--context",
    "drafter_gain": "--drafter-gain",
}
# The manifest's measured fields (``contracts/manifest.py``) and a program's ``results.json``.
MANIFEST_FIELDS: dict[str, Bound] = {
    "accept_len": ACCEPT_LEN,
    "tokens_per_s": MEASURED_TOKENS_PER_S,
    "baseline_tps": MEASURED_TOKENS_PER_S,
    "decode_ms": STEP_MS,
    "num_draft": NUM_DRAFT,
    "dilation.factor": DILATION,
    "dilation.unprofiled_tokens_per_s": MEASURED_TOKENS_PER_S,
    "dilation.profiled_tokens_per_s": MEASURED_TOKENS_PER_S,
    "dilation.unprofiled_baseline_tokens_per_s": MEASURED_TOKENS_PER_S,
}
REPORTED_ACCEPT = Bound(0.0, MAX_DRAFTS + 1.0, why="either convention: accepted drafts or tokens")
RESULTS_FIELDS: dict[str, Bound] = {
    "accept_len": REPORTED_ACCEPT,  # as reported, before the convention's +1
    "accepted_drafts_per_verify": REPORTED_ACCEPT,
    "tokens_per_s": MEASURED_TOKENS_PER_S,
    "baseline_tokens_per_s": MEASURED_TOKENS_PER_S,
    "unprofiled_tokens_per_s": MEASURED_TOKENS_PER_S,
    "decode_ms": STEP_MS,
    "num_draft": NUM_DRAFT,
}


def positive_numbers(value: Any) -> tuple[float, ...]:
    """A number or a list of them as the positive finite floats among them (bools, strings,
    zero, negatives, NaN and infinity left out): a rate, or a run's rates, as JSON gave them."""
    values = value if isinstance(value, (list, tuple)) else [value]
    return tuple(
        float(v)
        for v in values
        if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf
    )


def check_number(
    name: str, value: Any, bound: Bound, path: str | Path | None = None
) -> float | int:
    """``value`` when it is a finite number in ``bound``; else one line naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise VerifyprofError(f"{name} must be a number, got {value!r:.60}", path)
    if isinstance(value, float) and not math.isfinite(value):
        raise VerifyprofError(f"{name} must be a finite number, got {value!r}", path)
    if bound.integer and not float(value).is_integer():
        raise VerifyprofError(f"{name} must be an integer, got {value!r}", path)
    low_ok = value > bound.low if bound.low_open else value >= bound.low
    why = f" ({bound.why})" if bound.why else ""
    if not low_ok:
        if bound.low == 0:
            rule = "must be positive" if bound.low_open else "must not be negative"
        elif bound.positive and value <= 0:
            rule = "must be positive"
        else:
            rule = f"must be {'>' if bound.low_open else '>='} {bound.low:g}{bound.unit}{why}"
        raise VerifyprofError(f"{name} {rule}, got {value:g}", path)
    if value > bound.high:
        raise VerifyprofError(
            f"{name} must be <= {bound.high:g}{bound.unit}{why}, got {value:g}", path
        )
    return int(value) if bound.integer else float(value)


def check_options(values: Mapping[str, Any]) -> None:
    """Every option given (not None) within its range in :data:`OPTIONS`."""
    for option, value in values.items():
        if value is not None:
            check_number(option, value, OPTIONS[option])


def check_fields(options: Any, fields: Mapping[str, str] = WHATIF_FIELDS) -> None:
    """The options object's numbers (attribute -> option in ``fields``) within their ranges."""
    check_options({option: getattr(options, name) for name, option in fields.items()})


def manifest_number(
    name: str, value: Any, path: str | Path, shown: str | None = None
) -> float | int | None:
    """A manifest's measured field ``name`` (``shown``: its key in the file), None when absent."""
    if value is None:
        return None
    return check_number(f"manifest field {(shown or name)!r}", value, MANIFEST_FIELDS[name], path)


def check_probabilities(name: str, values: Any, path: str | Path | None = None) -> None:
    """A survival curve: a list of finite numbers in [0, 1]."""
    if not isinstance(values, list):
        raise VerifyprofError(f"{name} must be a list of numbers, got {values!r:.60}", path)
    for i, value in enumerate(values, start=1):
        check_number(f"{name} s{i}", value, PROBABILITY, path)


def non_finite(data: Any, where: str = "") -> Iterator[tuple[str, float]]:
    """(where, value) of every NaN or infinity in a JSON-like tree (dicts, lists, tuples, numpy
    scalars and arrays), depth first in document order."""
    np = sys.modules.get("numpy")  # not imported here: no array exists before numpy is loaded
    arrays = (np.ndarray, np.floating) if np is not None else ()
    stack: list[tuple[str, Any]] = [(where, data)]
    while stack:
        at, node = stack.pop()
        if isinstance(node, dict):
            items = [(f"{at}.{k}" if at else str(k), v) for k, v in node.items()]
            stack.extend(reversed(items))
        elif isinstance(node, (list, tuple)):
            stack.extend(reversed([(f"{at}[{i}]", v) for i, v in enumerate(node)]))
        elif isinstance(node, float):
            if not math.isfinite(node):
                yield at, node
        elif isinstance(node, arrays) and node.dtype.kind in "fc":
            bad = np.flatnonzero(~np.isfinite(np.asarray(node)).ravel())
            if bad.size:
                yield f"{at}[{int(bad[0])}]", float(np.asarray(node).ravel()[bad[0]])


class NonFiniteOutput(VerifyprofError):
    """A NaN or infinity reached an output: a bug (every input is bounded), refused rather than
    written as ``NaN`` (not JSON) or ``null`` (a silent hole)."""


def require_finite(data: Any, what: str) -> None:
    """Refuse to write ``data`` (``what``: the output) when a number in it is not finite."""
    for at, value in non_finite(data):
        raise NonFiniteOutput(
            f"internal error: {what} would hold {value!r} at {at or 'the top'}, which is not a"
            " finite number; nothing was written (please report this with the command line)"
        )


def check_results(results: dict[str, Any], path: str | Path) -> dict[str, Any]:
    """A program's ``results.json`` as the manifest may hold it: its known fields in range, and no
    NaN or infinity anywhere (they are not JSON)."""
    for name, bound in RESULTS_FIELDS.items():
        if results.get(name) is not None:
            check_number(f"field {name!r}", results[name], bound, path)
    if results.get("survival") is not None:
        check_probabilities("field 'survival'", results["survival"], path)
    for at, value in non_finite(results):
        raise VerifyprofError(
            f"field {at!r} is {value!r}, not a finite number (NaN is not JSON)", path
        )
    return results


# The model's own checks (its functions' arguments, from options or a notebook), in the same
# vocabulary: one line naming the value and the rule.


def _finite(name: str, value: float) -> float:
    if (
        value is None
        or not isinstance(value, (int, float))
        or isinstance(value, bool)
        or not math.isfinite(value)
    ):
        raise VerifyprofError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def check_positive(name: str, value: float) -> float:
    """Times and rates: strictly positive (a zero verify time means a broken measurement)."""
    value = _finite(name, value)
    if value <= 0:
        raise VerifyprofError(f"{name} must be positive, got {value:g}")
    return value


def check_nonnegative(name: str, value: float) -> float:
    value = _finite(name, value)
    if value < 0:
        raise VerifyprofError(f"{name} must not be negative, got {value:g}")
    return value


def check_alpha(alpha: float) -> float:
    alpha = _finite("alpha (acceptance rate)", alpha)
    if not 0.0 <= alpha < 1.0:
        raise VerifyprofError(f"alpha (acceptance rate) must be in [0, 1), got {alpha:g}")
    return alpha


def check_accept_len(value: float) -> float:
    """Accepted length counts the bonus token, so it is at least 1."""
    value = _finite("accept length", value)
    if value < 1.0:
        raise VerifyprofError(
            f"accept length must be >= 1 (it counts the bonus token), got {value:g}"
        )
    return float(check_number("accept length", value, ACCEPT_LEN))  # and at most 256 drafts + 1


def check_count(name: str, value: int, minimum: int = 1, maximum: int = MAX_COUNT) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        and not (isinstance(value, float) and value.is_integer())
    ):
        raise VerifyprofError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < minimum:
        raise VerifyprofError(f"{name} must be >= {minimum}, got {value}")
    if value > maximum:
        raise VerifyprofError(f"{name} must be <= {maximum}, got {value}")
    return value
