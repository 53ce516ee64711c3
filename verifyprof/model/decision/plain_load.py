"""The load curve from plain numbers (no trace): ``whatif --verify-ms V --accept-len A
--num-draft K --batch 1,8,32 --model M --hardware H`` (with ``--draft-ms``, ``--overhead-ms``,
``--baseline-tps`` / ``--decode-ms``, ``--context``).

The numbers describe one cycle at batch 1 (or at ``--batch`` when it is one number): the verify
over K+1 tokens, the draft's K forwards, the rest. They become a one-phase verify (its time all
"dense GEMMs", the part the roofline moves; what it loses to the floor carries over) and the
same load curve as a trace's: the verify moved by the roofline over batch x width tokens and
batch x context KV, the draft in proportion to the drafts and flat over the batch, acceptance
along the i.i.d. curve fitted to A at K (or ``--survival``), plain decoding from the baseline
given (else the verify at width 1 by the roofline).
"""

from __future__ import annotations

from typing import Any

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.model.cycle.throughput import Cycle
from verifyprof.model.decision.load import load_curve
from verifyprof.model.decision.server_flags import settings
from verifyprof.model.fixes.base import Scenario, Skip
from verifyprof.model.inputs.acceptance import Survival
from verifyprof.model.inputs.hardware import Hardware
from verifyprof.model.inputs.model_config import ModelConfig
from verifyprof.model.inputs.profile import VerifyProfile
from verifyprof.model.inputs.step_group import StepGroup


def numbers_profile(
    verify_ms: float, width: int, batch: int, phases_ms: dict[str, float], **group: Any
) -> VerifyProfile:
    """A verify known by numbers as the model's profile: one mean step of ``verify_ms`` split
    into ``phases_ms``, no kernels or launches (``group``: the rest of its step group: the load
    curve's one-phase verify here, the ranking's roofline split in ``plain_ranking``)."""
    one = StepGroup(
        device=0,
        rank=0,
        steps=1,
        wall_ms=verify_ms,
        gpu_span_ms=verify_ms,
        phases_ms=phases_ms,
        kernels=0.0,
        launches=0.0,
        graph_launches=0.0,
        attrs={},
        **group,
    )
    return VerifyProfile(verify=one, width=width, batch=batch, devices=1, source="plain numbers")


def plain_load(
    cycle: Cycle,
    num_draft: int | None,
    *,
    model: ModelConfig | None,
    hardware: Hardware | None,
    batches: tuple[int, ...] | None = None,
    contexts: tuple[float, ...] | None = None,
    context: float = 0.0,
    survival: Survival | None = None,
    tp: int = 1,
) -> dict[str, Any]:
    """The load curve's JSON (``load_curve``) from plain numbers' cycle, with its assumptions;
    or ``{"load_curve": None, "load_curve_skipped": why}``."""
    if not num_draft:
        return {"load_curve": None, "load_curve_skipped": "no load curve: give --num-draft K"}
    verify_ms, accept_len, batch = cycle.verify_ms, cycle.accept_len, cycle.batch
    if accept_len > num_draft + 1:
        raise VerifyprofError(f"--accept-len {accept_len:g} exceeds --num-draft + 1")
    dense = {"gemm_dense": verify_ms}  # the verify as one bandwidth-bound forward
    profile = numbers_profile(
        verify_ms,
        num_draft + 1,
        batch,
        dense,
        name="verify (given)",
        mode="given",
        totals_ms=dict(dense),
        comm_calls=None,
        comm_wait_ms=None,
        counts={},
    )
    s = Scenario(
        accept_len=accept_len,
        decode_ms=cycle.decode_ms,
        decode_given=cycle.decode_ms is not None,
        draft_ms=cycle.draft_ms,
        overhead_ms=cycle.overhead_ms,
        batch=batch,
        num_draft=num_draft,
        survival=survival,
        hardware=hardware,
        model=model,
        tp=tp,
        context=context or (contexts[0] if contexts else 0.0),
    )
    try:
        load = load_curve(profile, s, batches, contexts)
    except Skip as why:
        return {"load_curve": None, "load_curve_skipped": str(why)}
    load.server = settings(load, vllm=False)
    load.notes[:0] = [
        f"given: a {verify_ms:g} ms verify over {num_draft + 1} tokens per request at batch"
        f" {batch}, draft {cycle.draft_ms:g} ms, the rest {cycle.overhead_ms:g} ms, accept length"
        f" {accept_len:g} at {num_draft} drafts"
        + (f", plain decoding {cycle.decode_ms:.3f} ms a step" if cycle.decode_ms else ""),
        "the verify taken as one bandwidth-bound forward: all of it moves with the dense GEMMs'"
        " roofline floor; the draft scales with the drafts and stays flat over the batch",
    ]
    return {"load_curve": load.to_json()}
