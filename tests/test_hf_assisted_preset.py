"""The `hf-assisted` preset: against transformers' real source (vendored 5.17.0, the GPU machine's
version), and for real on a small random-weight Llama doing assisted generation on the CPU."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from pathlib import Path

import pytest

from verifyprof.capture.hooks import api as hooks
from verifyprof.capture.hooks.presets import load_preset
from verifyprof.capture.hooks.source_check import (
    SourceTree,
    check_preset,
    present_targets,
)

DATA = Path(__file__).parent / "data" / "transformers"
VERSION = "5.17.0"


def test_vendored_transformers_files_are_unmodified():
    provenance = (DATA / VERSION / "PROVENANCE.md").read_text()
    listed = re.findall(r"^- `([^`]+\.py)` `([0-9a-f]{64})`$", provenance, flags=re.M)
    assert [name for name, _ in listed] == [
        "transformers/generation/candidate_generator.py",
        "transformers/generation/utils.py",
    ]
    for name, digest in listed:
        assert hashlib.sha256((DATA / VERSION / name).read_bytes()).hexdigest() == digest


def test_every_hf_assisted_claim_holds_in_transformers_source():
    findings = check_preset(load_preset("hf-assisted"), SourceTree(DATA / VERSION), VERSION)
    assert findings == [], "\n".join(map(str, findings))


def test_hf_assisted_brackets_draft_verify_and_accept_in_5_17():
    present = present_targets(load_preset("hf-assisted"), SourceTree(DATA / VERSION))
    assert {line.partition(":")[0] for line in present} == {"draft", "verify", "accept"}
    assert "verify: transformers.generation.utils:GenerationMixin._assisted_decoding" in present


@pytest.fixture
def assisted_models():
    import torch
    import transformers

    hooks.install("hf-assisted")
    torch.manual_seed(0)

    def llama(hidden: int, layers: int):
        config = transformers.LlamaConfig(
            vocab_size=128,
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=layers,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=256,
        )
        return transformers.LlamaForCausalLM(config).eval()

    yield llama(32, 2), llama(16, 1), torch.randint(0, 128, (1, 8))
    hooks.uninstall()


def _generate(target, draft, prompt, do_sample: bool):
    from hooks_helpers import profiled

    return profiled(
        target.generate,
        prompt,
        assistant_model=draft,
        max_new_tokens=10,
        do_sample=do_sample,
        pad_token_id=0,
    )


def test_assisted_sampling_gives_draft_verify_accept_ranges_per_iteration(assisted_models):
    target, draft, prompt = assisted_models
    output, ranges = _generate(target, draft, prompt, do_sample=True)
    assert output.shape[1] > prompt.shape[1]
    counts = Counter(r.name for r in ranges)
    assert counts["verifyprof.draft"] == counts["verifyprof.verify"] >= 2
    # an iteration with no candidates left (length limit) verifies one token and samples nothing
    assert 1 <= counts["verifyprof.accept"] <= counts["verifyprof.verify"]
    assert all(r.parent is None for r in ranges)  # the assistant's forwards give no verify range
    assert [r.name for r in ranges[:3]] == [
        "verifyprof.draft",
        "verifyprof.verify",
        "verifyprof.accept",
    ]
    first_verify = next(r for r in ranges if r.name == "verifyprof.verify")
    assert first_verify.text.startswith("verifyprof.verify bs=1 tokens=")


def test_greedy_assisted_generation_gives_draft_and_verify_and_unchanged_tokens(assisted_models):
    target, draft, prompt = assisted_models
    hooked, ranges = _generate(target, draft, prompt, do_sample=False)
    hooks.uninstall()
    plain = target.generate(
        prompt, assistant_model=draft, max_new_tokens=10, do_sample=False, pad_token_id=0
    )
    assert hooked.tolist() == plain.tolist()
    counts = Counter(r.name for r in ranges)
    assert counts["verifyprof.draft"] == counts["verifyprof.verify"] >= 1
    assert (
        counts["verifyprof.accept"] == 0
    )  # greedy acceptance is inline code in _assisted_decoding
