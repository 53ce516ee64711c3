"""What the workload tests share: the tiny models on the CPU, a prefilled speculative state,
one iteration of it, and the workload's command line run in-process."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch

from verifyprof.workload.__main__ import main
from verifyprof.workload.config import TINY, TINY_DRAFT, RunConfig
from verifyprof.workload.model import DecoderLM
from verifyprof.workload.runner import Workload
from verifyprof.workload.spec import SpecState

REPO = Path(__file__).resolve().parents[1]
CPU = torch.device("cpu")
TINY_MOE = dataclasses.replace(TINY, moe_experts=8, moe_topk=2)
TINY_ARGS = ["--preset", "tiny", "--device", "cpu", "--context", "16", "--warmup", "1"]


def model(cfg=TINY) -> DecoderLM:
    return DecoderLM(cfg, device=CPU, dtype=torch.float32)


BARE_RUN = {"warmup": 0, "decode_steps": 0, "widths": (), "sweep_steps": 0, "context": 16}


def tiny_workload(**run: object) -> Workload:
    """The tiny target and draft on the CPU, running only what ``run`` asks for (no warm-up,
    plain decoding or width sweep unless given)."""
    config = RunConfig(**(BARE_RUN | run))
    return Workload(TINY, TINY_DRAFT, config, device=CPU, dtype=torch.float32)


def spec_state(target_cfg=TINY, draft_cfg=TINY_DRAFT, batch=2, k=3) -> SpecState:
    state = SpecState(model(target_cfg), model(draft_cfg), batch=batch, num_draft=k, max_len=256)
    context = torch.randint(
        0, target_cfg.vocab, (batch, 16), generator=torch.Generator().manual_seed(1)
    )
    state.prefill(context)
    return state


def spec_iteration(state: SpecState) -> list[int]:
    state.draft_begin()
    for _ in range(state.k):
        state.draft_step()
    accept_lens = state.accept(state.verify(), simulated=False).tolist()
    state.draft_extend()
    return accept_lens


def run_main(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "summary.json"
    assert main([*TINY_ARGS, *args, "--out", str(out)]) == 0
    return json.loads(out.read_text())


class ReplayedOnCPU:
    """Stands in for a CUDA graph on the CPU: replay() reruns the function and writes into the
    tensors of the first ("captured") call, as a real replay writes into its static outputs."""

    def __init__(self, fn, *, before=None, warmup=2, pool=None):
        self.fn = fn
        if before is not None:
            before()
        self.output = fn()

    def replay(self):
        out = self.fn()
        if isinstance(out, torch.Tensor):
            self.output.copy_(out)
        return self.output


def range_names(prof) -> list[str]:
    events = [e for e in prof.events() if e.name.startswith("verifyprof.")]
    return [e.name for e in sorted(events, key=lambda e: e.time_range.start)]
