"""Plain decoding for plain numbers where no rate is given: the model's roofline at one token
(never the verify's own time), and the hedge where the answer flips between that floor and the
floor plus the verify's unexplained rest."""

from __future__ import annotations

from verifyprof.model.cycle.throughput import Cycle
from verifyprof.model.cycle.verify_cost import phase_rooflines
from verifyprof.model.decision.candidates import Ranking
from verifyprof.model.inputs.given import Files
from verifyprof.model.inputs.hardware import Hardware
from verifyprof.model.inputs.model_config import ModelConfig
from verifyprof.model.inputs.options import WhatifOptions

REST = "other"  # the phase that holds what the roofline does not explain
PEAK_DTYPE = {"gemm_dense": "dense_dtype", "gemm_moe": "expert_dtype", "attention": "kv_dtype"}


def roofline_floors(tokens: int, o: WhatifOptions, model: ModelConfig, hardware: Hardware):
    """Each roofline phase's floor (ms) over ``tokens``, the allreduces per forward and one's
    estimate."""
    bw = hardware.bandwidth_tbps * 1e12
    floors = {
        phase: roof.seconds(bw, hardware.peak_tflops(getattr(model, PEAK_DTYPE[phase])) * 1e12)
        * 1e3
        for phase, roof in phase_rooflines(model, tokens, o.tp or 1, o.context or 0.0).items()
    }
    calls = float(model.allreduces_per_forward) if (o.tp or 1) > 1 else 0.0
    est = hardware.allreduce_us(tokens * model.activation_bytes_per_token(), o.tp or 1, "nccl")
    return floors, calls, est


def roofline_step_ms(o: WhatifOptions, files: Files) -> float | None:
    """Plain decoding's step at the model's roofline on the hardware (GEMMs and attention at
    their floor over one token per request, the allreduces at the link model's time): a floor,
    where neither --decode-ms nor --baseline-tps is given; None without --model and
    --hardware."""
    if not (o.model and o.hardware):
        return None
    model, hardware = files.model(), files.hardware()
    floors, calls, est = roofline_floors(o.batch or 1, o, model, hardware)
    return sum(floors.values()) + calls * est.us / 1e3


ROOFLINE_SOURCE = "the model's roofline at one token (a floor: no --decode-ms or --baseline-tps)"


def flips_between(now: Cycle, roofline_ms: float, rest_ms: float) -> bool:
    """Whether speculating beats plain decoding with the verify's rest but not at its floor."""
    return 1e3 / (roofline_ms + rest_ms) < now.tokens_per_s < 1e3 / roofline_ms


def hedge(r: Ranking, roofline_ms: float) -> None:
    """Plain decoding at its roofline is a floor: the real step adds what the verify's rest
    holds (kernel loss, norms, launches, the host). Where the answer flips between the two, the
    verdict says so and names the options that settle it."""
    assert r.plain is not None and r.verdict is not None
    rest = r.profile.verify.phases_ms.get(REST, 0.0)
    spec, roof_tps, alt_tps = r.current.tokens_per_s, 1e3 / roofline_ms, 1e3 / (roofline_ms + rest)
    for point in r.curve.points if r.curve is not None else []:
        if point["num_draft"] == 0:
            point["verify_source"] = "roofline"
    r.plain.measured, r.plain.mode = False, "roofline"
    r.plain.evidence = "no --decode-ms or --baseline-tps"
    r.plain.alternative = ("with the verify's unexplained rest", alt_tps)
    if not flips_between(r.current, roofline_ms, rest):
        return
    words = (
        f"Speculate or not depends on plain decoding's step, which was not given: at its roofline"
        f" floor ({roofline_ms:.3f} ms) plain decoding makes {roof_tps:.1f} tok/s, above"
        f" speculating's {spec:.1f}; with the verify's unexplained rest"
        f" ({roofline_ms + rest:.3f} ms) it would make {alt_tps:.1f}, below it. Give --decode-ms"
        " or --baseline-tps (the measured plain decode step) to settle it."
    )
    old, r.verdict.decision = r.verdict.decision, words
    r.verdict.warnings = [words if w == old else w for w in r.verdict.warnings]
