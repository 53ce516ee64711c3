"""What to set in the server for each load range of the load curve: SGLang's launch flags and
vLLM's speculative config with its per-batch-size draft counts.

Checked against the sources named here (tests/test_load_flags.py holds the fields read from
them):

* SGLang 0.5.23 (PyPI wheel of 2026-10-30): ``sglang/srt/arg_groups/fields/spec.py`` defines
  ``speculative_num_steps``, ``speculative_eagle_topk``, ``speculative_num_draft_tokens`` and
  ``fields/exec_.py`` ``cuda_graph_max_bs_decode`` (CLI names: ``--`` + the field with ``-``).
  ``arg_groups/speculative_hook.py`` sets num-draft-tokens to num-steps + 1 when top-k is 1 (a
  chain); ``cuda_graph_hook.generate_decode_cuda_graph_batch_sizes`` captures the decode/verify
  graphs up to that batch. Older SGLang releases spell the last one ``--cuda-graph-max-bs``.
  One server runs one setting: the flags are per load range, for the load you expect.
* vLLM (github vllm-project/vllm, ``vllm/config/speculative.py`` at 002e77c1f0ef and
  ``vllm/v1/spec_decode/dynamic/utils.py`` at a6f6bb1d3c17): ``SpeculativeConfig`` takes
  ``num_speculative_tokens`` (> 0) and ``num_speculative_tokens_per_batch_size``, a list of
  inclusive ``(range_start, range_end, num_speculative_tokens)``: positive, sorted,
  non-overlapping, the first starting at 1, K >= 0 and clipped to ``num_speculative_tokens``;
  batches past the last range keep its K.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verifyprof.model.decision.load import ContextCurve, LoadCurve

SGLANG_VERSION = "SGLang 0.5.23"
VLLM_VERSION = "vLLM main at a6f6bb1d3c17 (vllm/v1/spec_decode/dynamic/utils.py)"


# a load range whose band is wider than this gets no copy-ready flags: the capture that would
# measure it instead (issue 42: bands of +/-122% printed flags as if they held)
MAX_FLAG_BAND = 0.25


def withheld(basis: dict[str, Any]) -> bool:
    """Whether a range's setting rests on too wide a band to be printed as flags."""
    return float(basis.get("band") or 0.0) > MAX_FLAG_BAND


def sglang_ranges(curve: ContextCurve, topk: int = 1) -> list[dict[str, Any]]:
    """One SGLang launch setting per load range (consecutive batches with one best k); a range
    whose band exceeds :data:`MAX_FLAG_BAND` gets none (``flags`` None), the capture that
    would measure it instead."""
    out = []
    for first, last, k in curve.ranges():
        graphs = f"--cuda-graph-max-bs-decode {last}"
        basis = curve.range_basis(first, last)
        if withheld(basis):
            out.append(
                {
                    "batches": [first, last],
                    "num_draft": k,
                    "flags": None,
                    "measure_command": curve.measure_range(first, last),
                    **basis,
                }
            )
            continue
        if k == 0:
            flags = f"no --speculative-algorithm (plain decoding); {graphs}"
        else:
            flags = (
                f"--speculative-num-steps {k} --speculative-eagle-topk {topk}"
                f" --speculative-num-draft-tokens {k + 1} {graphs}"
            )
        out.append(
            {
                "batches": [first, last],
                "num_draft": k,
                "flags": flags,
                **basis,
            }
        )
    return out


SWITCHING = {
    "vllm": (
        "switching k at a batch threshold: vLLM #49548 (open) reports aggregate throughput"
        " collapsing under concurrency at the num_speculative_tokens_per_batch_size threshold"
        " (MTP, PIECEWISE CUDA graphs: the schedule also downgrades FULL_AND_PIECEWISE to"
        " PIECEWISE, about 14% single-stream) and #48494 a failed full decode-graph capture with"
        " it: measure the switch under concurrency, or keep one static k"
    ),
    "sglang": (
        "switching k at a batch threshold: one SGLang server runs one setting unless adaptive"
        " steps are on; #24055 (merged) keeps per-batch-size state and sizes the KV allocation"
        " for the largest candidate step, #28045 (open) would measure draft/verify cost per"
        " batch size at start-up: measure the switch under concurrency before relying on it"
    ),
}


def vllm_config(curve: ContextCurve) -> dict[str, Any] | None:
    """vLLM's ``--speculative-config`` fields for the curve: the largest k as
    ``num_speculative_tokens`` and the ranges as ``num_speculative_tokens_per_batch_size``
    (None where the best k is 0 at every batch: no speculative config at all)."""
    ranges = curve.ranges()
    top = max(k for _, _, k in ranges)
    if top == 0 or vllm_withheld(curve):
        return None
    return {
        "num_speculative_tokens": top,
        "num_speculative_tokens_per_batch_size": [[a, b, k] for a, b, k in ranges],
    }


def vllm_withheld(curve: ContextCurve) -> str | None:
    """Why vLLM's one config for every batch is not printed: a range of it rests on a band over
    :data:`MAX_FLAG_BAND` (None where every range holds)."""
    wide = [
        (a, b, curve.range_basis(a, b)["band"])
        for a, b, _ in curve.ranges()
        if withheld(curve.range_basis(a, b))
    ]
    if not wide:
        return None
    a, b, band = wide[0]
    return (
        f"no config: batch {a}-{b} rests on a band of +/-{band:.0%} (over"
        f" {MAX_FLAG_BAND:.0%}); measure it with: {curve.measure_range(a, b)}"
    )


def settings(load: LoadCurve, vllm: bool) -> dict[str, Any]:
    """Per context length: SGLang's flags per load range and vLLM's config; which applies to
    the trace (``sglang`` / ``vllm``: the trace's server, when known)."""
    per_context = []
    for curve in load.curves:
        cfg = vllm_config(curve)
        switches = len({k for _, _, k in curve.ranges()}) > 1
        per_context.append(
            {
                "context": curve.context,
                "sglang": sglang_ranges(curve),
                "vllm": cfg,
                "vllm_speculative_config": json.dumps(cfg) if cfg else None,
                "vllm_withheld": vllm_withheld(curve),
                "vllm_basis": [curve.range_basis(a, b) for a, b, _ in curve.ranges()],
                "switching": dict(SWITCHING) if switches else None,
            }
        )
    server = "sglang" if load.sglang else "vllm" if vllm else None
    shape = load.acceptance
    return {
        "server": server,
        **(
            {
                "note": f"the trace verifies {shape['verify_tokens_per_request']} tokens per"
                f" request for {shape['num_draft']} drafts (a tree); the flags are a chain's"
                " (top-k 1), whose verify is narrower at every batch"
            }
            if shape["kind"] == "tree"
            else {}
        ),
        "versions": {"sglang": SGLANG_VERSION, "vllm": VLLM_VERSION},
        "per_context": per_context,
    }
