"""Every `sglang` preset target against SGLang's real source, read with ast (never imported).

The vendored source (tests/data/sglang/<version>/, see each PROVENANCE.md) is the newest release
at the time of writing (0.5.23) and one from 2025 (0.5.6.post2, still with Spec V1). A name the
preset claims for a version (since <= version < until) must be defined there, with the parameters
its predicate and extractor read, and its claimed `from X import name` bindings must be there;
a name present outside its claimed range is a wrong claim too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from pathlib import Path

import pytest

from verifyprof.capture.hooks.lookup import Target
from verifyprof.capture.hooks.presets import Alternative, Binding, load_preset
from verifyprof.capture.hooks.source_check import (
    SourceTree,
    check_preset,
    present_targets,
)

DATA = Path(__file__).parent / "data" / "sglang"
VERSIONS = sorted(p.parent.name for p in DATA.glob("*/PROVENANCE.md"))
NEWEST, OF_2025 = "0.5.23", "0.5.6.post2"


def source(version: str) -> SourceTree:
    return SourceTree(DATA / version)


def test_the_newest_release_and_one_from_2025_are_vendored():
    assert {NEWEST, OF_2025} <= set(VERSIONS)


@pytest.mark.parametrize("version", VERSIONS)
def test_vendored_files_are_the_wheels_files_unmodified(version):
    provenance = (DATA / version / "PROVENANCE.md").read_text()
    listed = re.findall(r"^- `([^`]+\.py)` `([0-9a-f]{64})`$", provenance, flags=re.M)
    assert listed
    on_disk = sorted(str(p.relative_to(DATA / version)) for p in (DATA / version).rglob("*.py"))
    assert sorted(name for name, _ in listed) == on_disk
    for name, digest in listed:
        assert hashlib.sha256((DATA / version / name).read_bytes()).hexdigest() == digest, name
    assert "Apache License" in (DATA / version / "LICENSE").read_text()


@pytest.mark.parametrize("version", VERSIONS)
def test_every_sglang_preset_claim_holds_in_the_real_source(version):
    findings = check_preset(load_preset("sglang"), source(version), version)
    assert findings == [], "\n".join(map(str, findings))


def test_the_version_robust_verify_bracket_exists_in_both_versions():
    for version in (NEWEST, OF_2025):
        present = present_targets(load_preset("sglang"), source(version))
        assert "verify: sglang.srt.model_executor.model_runner:ModelRunner.forward" in present


def test_newest_has_spec_v2_names_only():
    present = present_targets(load_preset("sglang"), source(NEWEST))
    assert "accept: sglang.srt.speculative.eagle_utils:eagle_sample" in present
    assert "verify: sglang.srt.speculative.eagle_worker_common:run_eagle_verify" in present
    assert not [t for t in present if ".eagle_worker:" in t]  # Spec V1 deleted in 0.5.13


def test_2025_release_has_v1_and_v2_names():
    present = present_targets(load_preset("sglang"), source(OF_2025))
    assert (
        "spec_step: sglang.srt.speculative.eagle_worker:EAGLEWorker.forward_batch_generation"
        in present
    )
    assert (
        "spec_step: sglang.srt.speculative.eagle_worker_v2:EAGLEWorkerV2.forward_batch_generation"
        in present
    )
    assert "accept: sglang.srt.speculative.eagle_info_v2:EagleVerifyInputV2Mixin.sample" in present
    assert not [t for t in present if "eagle_sample" in t]


# --- the check itself fails on a moved name, a wrong claim, wrong parameters, a wrong binding ---


def _with_alternative(entry_index: int, alt: Alternative):
    preset = load_preset("sglang")
    entries = list(preset.entries)
    entries[entry_index] = dataclasses.replace(entries[entry_index], alternatives=(alt,))
    return dataclasses.replace(preset, entries=tuple(entries))


def _entry_index(phase: str, when: str | None = None) -> int:
    entries = load_preset("sglang").entries
    return next(i for i, e in enumerate(entries) if e.phase == phase and e.when == when)


def test_a_moved_name_is_reported_missing():
    moved = Target("sglang.srt.speculative.eagle_worker_v2", "EAGLEWorkerV2.verify_batch")
    preset = _with_alternative(_entry_index("verify"), Alternative(moved, since="0.5.4"))
    findings = check_preset(preset, source(NEWEST), NEWEST)
    assert [(f.target, f.problem) for f in findings] == [(str(moved), "missing")]
    assert "name not defined in 0.5.23" in findings[0].detail


def test_a_moved_module_is_reported_missing():
    moved = Target("sglang.srt.speculative.eagle_worker_v3", "EAGLEWorkerV2.verify")
    preset = _with_alternative(_entry_index("verify"), Alternative(moved))
    findings = check_preset(preset, source(NEWEST), NEWEST)
    assert [f.problem for f in findings] == ["missing"]
    assert "module not found" in findings[0].detail


def test_a_name_outside_its_claimed_versions_is_reported():
    target = Target("sglang.srt.speculative.eagle_worker", "EAGLEWorker.verify")
    preset = _with_alternative(_entry_index("verify"), Alternative(target, until="0.5.6"))
    assert [f.problem for f in check_preset(preset, source(OF_2025), OF_2025)] == ["unclaimed"]


def test_a_predicate_reading_a_parameter_the_function_lacks_is_reported():
    target = Target("sglang.srt.speculative.eagle_utils", "eagle_sample")  # has no forward_batch
    preset = _with_alternative(_entry_index("verify", "sglang_target_verify"), Alternative(target))
    findings = check_preset(preset, source(NEWEST), NEWEST)
    assert findings and {f.problem for f in findings} == {"params"}
    assert "reads one of ('forward_batch',)" in findings[0].detail


def test_a_binding_module_that_does_not_import_the_name_is_reported():
    target = Target("sglang.srt.speculative.eagle_utils", "eagle_sample")
    wrong = Binding(
        "sglang.srt.speculative.eagle_worker_v2"
    )  # imports run_eagle_verify, not eagle_sample
    preset = _with_alternative(_entry_index("accept"), Alternative(target, bindings=(wrong,)))
    findings = check_preset(preset, source(NEWEST), NEWEST)
    assert [f.problem for f in findings] == ["binding"]
