"""The `workload` preset reproduces the workload's own ranges from the outside, on a real CPU
run."""

from __future__ import annotations

from pathlib import Path

import verifyprof
from verifyprof.capture.hooks import api as hooks
from verifyprof.capture.hooks.presets import load_preset
from verifyprof.capture.hooks.source_check import SourceTree, check_preset

REPO = Path(__file__).resolve().parents[1]


def test_workload_preset_names_functions_of_this_repository():
    findings = check_preset(load_preset("workload"), SourceTree(REPO), verifyprof.__version__)
    assert findings == [], "\n".join(map(str, findings))


def _ranges_of_a_tiny_run(builtin_ranges: bool):
    import torch
    from hooks_helpers import profiled

    from verifyprof.workload.config import TINY, TINY_DRAFT, RunConfig
    from verifyprof.workload.runner import Workload

    run = RunConfig(
        modes=("eager",),
        steps=3,
        warmup=1,
        decode_steps=2,
        widths=(2,),
        sweep_steps=1,
        ranges=builtin_ranges,
        context=16,
    )
    with torch.inference_mode():
        workload = Workload(TINY, TINY_DRAFT, run, device=torch.device("cpu"), dtype=torch.float32)
    results, ranges = profiled(workload.run_all)
    return results, ranges


def test_hooked_workload_without_its_ranges_emits_exactly_its_built_in_ranges():
    builtin_results, builtin = _ranges_of_a_tiny_run(builtin_ranges=True)
    hooks.install("workload")
    try:
        hooked_results, hooked = _ranges_of_a_tiny_run(builtin_ranges=False)
    finally:
        hooks.uninstall()
    # warmup then measured: (1 + 3) spec steps of 5 ranges, (1 + 2) decodes, (1 + 1) sweep verifies
    assert len(builtin) == 4 * 5 + 3 + 2
    assert hooked == builtin  # same texts, same order, same nesting
    spec = [r for r in hooked_results if r["kind"] == "spec"][0]
    assert (
        spec["tokens_head"] == [r for r in builtin_results if r["kind"] == "spec"][0]["tokens_head"]
    )


def test_workload_without_ranges_or_hooks_emits_none():
    _, ranges = _ranges_of_a_tiny_run(builtin_ranges=False)
    assert ranges == []
