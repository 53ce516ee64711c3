"""The real `sglang` preset on a small package laid out like SGLang 0.5.23's speculative V2 path.

SGLang needs CUDA, so these tests run the preset's predicates, extractors, nesting and binding
fixes on a stand-in package with SGLang's module paths, class names, signatures and call
structure (EAGLEWorkerV2.forward_batch_generation -> draft -> verify -> run_eagle_verify ->
ModelRunner.forward(TARGET_VERIFY) -> eagle_sample -> _draft_extend_for_decode). That those names
and signatures are SGLang's real ones is checked in test_sglang_preset.py against its source.
"""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest
import torch
from hooks_helpers import Recorded, forget_modules, profiled

from verifyprof.capture.hooks import api as hooks
from verifyprof.capture.hooks import plugin

FILES = {
    "sglang/__init__.py": "",
    "sglang/srt/__init__.py": "",
    "sglang/srt/model_executor/__init__.py": "",
    "sglang/srt/speculative/__init__.py": "",
    "sglang/srt/model_executor/forward_batch_info.py": (
        """
        import enum

        class ForwardMode(enum.IntEnum):
            EXTEND = 1
            DECODE = 2
            TARGET_VERIFY = 3
            DRAFT_EXTEND_V2 = 4

            def is_extend(self):
                return self in (ForwardMode.EXTEND, ForwardMode.TARGET_VERIFY)

            def is_decode(self):
                return self == ForwardMode.DECODE

            def is_target_verify(self):
                return self == ForwardMode.TARGET_VERIFY

        class ForwardBatch:
            def __init__(self, forward_mode, batch_size, spec_info=None):
                self.forward_mode = forward_mode
                self.batch_size = batch_size
                self.spec_info = spec_info
    """
    ),
    "sglang/srt/model_executor/model_runner.py": (
        """
        class ModelRunner:
            def __init__(self, is_draft_worker=False):
                self.is_draft_worker = is_draft_worker
                self.modes = []

            def forward(self, forward_batch, skip_attn_backend_init=None, pp_proxy_tensors=None,
                        reinit_attn_backend=False, split_forward_count=1):
                self.modes.append(forward_batch.forward_mode.name)
                return "logits"
    """
    ),
    "sglang/srt/speculative/eagle_utils.py": (
        """
        def eagle_sample(verify_input, batch, logits_output, vocab_mask, uno_target_max_top_k=None):
            return "accept_lens"
    """
    ),
    "sglang/srt/speculative/eagle_worker_common.py": (
        """
        from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode
        from sglang.srt.speculative.eagle_utils import (
            eagle_sample,
        )

        def run_eagle_verify(
            batch, *, target_worker, topk, num_draft_tokens, grammar_barrier=None
        ):
            forward_batch = ForwardBatch(
                ForwardMode.TARGET_VERIFY, len(batch.seq_lens), batch.spec_info
            )
            logits = target_worker.forward(forward_batch)
            return eagle_sample(batch.spec_info, batch, logits, None)
    """
    ),
    "sglang/srt/speculative/eagle_worker_v2.py": (
        """
        from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode
        from sglang.srt.speculative.eagle_worker_common import run_eagle_verify

        class EagleVerifyInput:
            def __init__(self, draft_token_num):
                self.draft_token_num = draft_token_num

        class EagleDraftWorker:
            def __init__(self, draft_runner, steps, topk):
                self.draft_runner, self.speculative_num_steps, self.topk = draft_runner, steps, topk

            def draft(self, batch, *, with_topology=False):
                for _ in range(self.speculative_num_steps):
                    self.draft_runner.forward(ForwardBatch(ForwardMode.DECODE, len(batch.seq_lens)))
                return EagleVerifyInput(self.speculative_num_steps + 1)

            def _draft_extend_for_decode(self, batch, batch_result, kv_loc_plan=None):
                self.draft_runner.forward(
                    ForwardBatch(ForwardMode.DRAFT_EXTEND_V2, len(batch.seq_lens))
                )

        class EAGLEWorkerV2:
            def __init__(self, target_runner, draft_worker):
                self.target_runner, self.draft_worker = target_runner, draft_worker
                self.topk = 1
                self.speculative_num_draft_tokens = draft_worker.speculative_num_steps + 1

            def forward_batch_generation(
                self, batch, on_publish=None, grammar_barrier=None, pp_proxy_tensors=None
            ):
                if batch.forward_mode.is_extend() or batch.is_extend_in_batch:
                    self.target_runner.forward(
                        ForwardBatch(ForwardMode.EXTEND, len(batch.seq_lens))
                    )
                    return "prefilled"
                batch.spec_info = self.draft_worker.draft(batch)
                result = self.verify(batch, grammar_barrier=grammar_barrier)
                self.draft_worker._draft_extend_for_decode(batch, result)
                return result

            def verify(self, batch, pp_proxy_tensors=None, grammar_barrier=None):
                return run_eagle_verify(batch, target_worker=self.target_runner, topk=self.topk,
                                        num_draft_tokens=self.speculative_num_draft_tokens)
    """
    ),
}


class ScheduleBatch:
    def __init__(self, forward_mode, bs: int):
        self.forward_mode, self.seq_lens = forward_mode, torch.zeros(bs, dtype=torch.int64)
        self.is_extend_in_batch, self.spec_info = False, None


@pytest.fixture
def sglang_tree(tmp_path, monkeypatch):
    for name, text in FILES.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    real = {
        name: module
        for name, module in sys.modules.items()
        if name == "sglang" or name.startswith("sglang.")
    }
    forget_modules("sglang")  # a real SGLang imported earlier must not shadow the stand-in
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield
    hooks.uninstall()
    forget_modules("sglang")
    sys.modules.update(real)


def _server(draft_steps: int = 3):
    v2 = importlib.import_module("sglang.srt.speculative.eagle_worker_v2")
    runner = importlib.import_module("sglang.srt.model_executor.model_runner")
    modes = importlib.import_module("sglang.srt.model_executor.forward_batch_info").ForwardMode
    target, draft = runner.ModelRunner(), runner.ModelRunner(is_draft_worker=True)
    worker = v2.EAGLEWorkerV2(target, v2.EagleDraftWorker(draft, steps=draft_steps, topk=1))
    return worker, target, draft, modes


EXPECTED_STEP = [
    Recorded("verifyprof.spec_step bs=2 tokens=4", None),
    Recorded("verifyprof.draft bs=2 steps=3 topk=1", "verifyprof.spec_step bs=2 tokens=4"),
    Recorded("verifyprof.verify bs=2 tokens=4", "verifyprof.spec_step bs=2 tokens=4"),
    Recorded("verifyprof.accept bs=2 tokens=4", "verifyprof.verify bs=2 tokens=4"),
    Recorded("verifyprof.draft_extend bs=2", "verifyprof.spec_step bs=2 tokens=4"),
]


def test_one_decode_step_gives_the_spec_phases_nested(sglang_tree):
    hooks.install("sglang")  # before SGLang is imported: patched as each module loads
    worker, target, draft, modes = _server()
    result, ranges = profiled(worker.forward_batch_generation, ScheduleBatch(modes.DECODE, bs=2))
    assert result == "accept_lens"
    assert ranges == EXPECTED_STEP
    assert target.modes == ["TARGET_VERIFY"]  # ...whose forward opened no second verify range
    assert draft.modes == ["DECODE"] * 3 + ["DRAFT_EXTEND_V2"]  # the drafter's forwards open none


def test_only_the_target_verify_forward_gets_a_verify_range(sglang_tree):
    hooks.install("sglang")
    _, target, draft, modes = _server()
    batch = importlib.import_module("sglang.srt.model_executor.forward_batch_info").ForwardBatch
    _, ranges = profiled(
        lambda: [
            target.forward(batch(modes.TARGET_VERIFY, 4)),
            draft.forward(batch(modes.TARGET_VERIFY, 4)),
            target.forward(batch(modes.DRAFT_EXTEND_V2, 4)),
        ]
    )
    assert [r.text for r in ranges] == ["verifyprof.verify bs=4"]


def test_target_decode_and_prefill_give_baseline_ranges(sglang_tree):
    hooks.install("sglang")
    _, target, draft, modes = _server()
    batch = importlib.import_module("sglang.srt.model_executor.forward_batch_info").ForwardBatch
    _, ranges = profiled(
        lambda: [
            target.forward(batch(modes.DECODE, 8)),
            target.forward(batch(modes.EXTEND, 1)),
            draft.forward(batch(modes.DECODE, 8)),
        ]
    )
    assert [r.text for r in ranges] == ["verifyprof.decode bs=8", "verifyprof.prefill bs=1"]


def test_prefill_batch_is_not_a_spec_step(sglang_tree):
    hooks.install("sglang")
    worker, _, _, modes = _server()
    result, ranges = profiled(worker.forward_batch_generation, ScheduleBatch(modes.EXTEND, bs=1))
    assert result == "prefilled"
    assert [r.text for r in ranges] == ["verifyprof.prefill bs=1"]


def test_plugin_after_import_patches_classes_and_rebinds_eagle_sample(sglang_tree, monkeypatch):
    worker, target, _, modes = _server()  # SGLang fully imported first, as when load_plugins() runs
    common = importlib.import_module("sglang.srt.speculative.eagle_worker_common")
    original = common.eagle_sample
    monkeypatch.setenv("VERIFYPROF_HOOKS", "sglang")
    plugin.load()
    assert common.eagle_sample is not original
    assert common.eagle_sample.__wrapped__ is original
    _, ranges = profiled(worker.forward_batch_generation, ScheduleBatch(modes.DECODE, bs=2))
    assert ranges == EXPECTED_STEP
    states = {s.target: s for s in hooks.status()}
    accept = states["sglang.srt.speculative.eagle_utils:eagle_sample"]
    assert accept.state == "patched" and accept.bindings == (
        "sglang.srt.speculative.eagle_worker_common",
    )
    assert (
        states["sglang.srt.speculative.eagle_worker:EAGLEWorker.verify"].state == "pending"
    )  # V1: not in 0.5.23


def test_hooks_change_no_result_of_the_host(sglang_tree):
    worker, _, _, modes = _server()
    plain = [
        worker.forward_batch_generation(ScheduleBatch(m, bs=3))
        for m in (modes.EXTEND, modes.DECODE)
    ]
    hooks.install("sglang")
    hooked = [
        worker.forward_batch_generation(ScheduleBatch(m, bs=3))
        for m in (modes.EXTEND, modes.DECODE)
    ]
    assert hooked == plain == ["prefilled", "accept_lens"]
