"""Run the workload: warm up, then the measured speculative, baseline-decode and width-sweep
steps inside one cudaProfilerStart/Stop window, under verifyprof's NVTX ranges, timed per phase
with CUDA events. Returns the summary that ``__main__`` writes (the runs' records: ``runs.py``).

Range layout (payload = step index; attributes in the range text):

* ``verifyprof.spec_step bs=B tokens=k+1 graph=G`` around each iteration, containing in order
  ``verifyprof.draft bs=B tokens=k graph=G``, ``verifyprof.verify bs=B tokens=k+1 graph=G``,
  ``verifyprof.accept bs=B tokens=k+1``, ``verifyprof.draft_extend bs=B tokens=k+1 graph=G``;
* ``verifyprof.decode bs=B tokens=1 graph=G`` around each baseline step;
* ``verifyprof.verify bs=B tokens=n graph=G sweep=1`` around each verify of the width sweep;
* ``verifyprof.verify bs=B tokens=k+1 graph=G pipelined=1`` around each verify of the pipelined
  run (``pipelined.py``: queued back to back, no host sync between them).

Mode "compile" runs the speculative iterations (and the pipelined verifies) with the verify
forward under ``torch.compile`` (``compiled.py``) and the other phases eager; its ranges add
``compile=1`` (spec_step and verify; the verify's ``graph=1`` where cudagraph trees replay it).
It has no decode baseline or width sweep.

Each iteration ends with the host reading the accept lengths (a sync inside ``accept``, as a
non-overlapped server does), so the host never runs more than one step ahead; each baseline step
reads its token the same way, and each sweep forward is followed by a sync outside its range.
CUDA events bracket each phase's range from outside, so a phase's time is GPU time from the
end of the previous phase to the end of its own work, launch gaps included.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from verifyprof.contracts.plumbing.nvtx import nvtx_range
from verifyprof.contracts.ranges import (
    ACCEPT,
    DECODE,
    DRAFT,
    DRAFT_EXTEND,
    PREFILL,
    SPEC_STEP,
    VERIFY,
)
from verifyprof.workload.accept import solve_alpha, survival_curve
from verifyprof.workload.clock import Clock
from verifyprof.workload.compiled import CompiledVerify
from verifyprof.workload.config import ModelConfig, RunConfig
from verifyprof.workload.graphs import PhaseGraphs
from verifyprof.workload.model import DecoderLM
from verifyprof.workload.pipelined import run_pipelined
from verifyprof.workload.runs import add_speedups, run_decode, run_spec, run_sweep
from verifyprof.workload.spec import SpecState
from verifyprof.workload.tp import TP


@contextlib.contextmanager
def _no_range(name: str, payload: int | float | None = None, **attrs: object) -> Iterator[None]:
    yield


def max_len_for(run: RunConfig) -> int:
    """Cache slots enough for the longest run from the prefill point (runs reset to it)."""
    k1 = run.num_draft + 1
    advance = max(max(run.steps, run.warmup) * k1, run.decode_steps, run.warmup, 2)
    widest = max((*run.widths, k1))
    return -(-(run.context + advance + 2 + widest + 8) // 64) * 64


class Workload:
    def __init__(
        self,
        target_cfg: ModelConfig,
        draft_cfg: ModelConfig,
        run: RunConfig,
        *,
        device: torch.device,
        dtype: torch.dtype,
        tp: TP | None = None,
    ):
        run.validate()
        if "graph" in run.modes and device.type != "cuda":
            raise ValueError("graph mode needs a CUDA device")
        if target_cfg.vocab != draft_cfg.vocab:
            raise ValueError("target and draft must share the vocabulary")
        self.run_cfg, self.device, self.dtype, self.tp = run, device, dtype, tp or TP()
        self.target_cfg, self.draft_cfg = target_cfg, draft_cfg
        self.range = nvtx_range if run.ranges else _no_range
        self.clock = Clock(device)
        self.target_model = DecoderLM(
            target_cfg, device=device, dtype=dtype, tp=self.tp, moe_impl=run.moe_impl
        )
        self.draft_model = DecoderLM(
            draft_cfg, device=device, dtype=dtype, tp=self.tp, moe_impl=run.moe_impl
        )
        if (
            "graph" in run.modes
            and target_cfg.moe_experts
            and self.target_model.moe_impl != "grouped_mm"
        ):
            raise ValueError(
                "MoE graph mode needs torch._grouped_mm (moe_impl grouped_mm); "
                f"it is unavailable or wrong for {device.type}/{dtype} here"
            )
        self.max_len = max_len_for(run)
        self.state = SpecState(
            self.target_model,
            self.draft_model,
            batch=run.batch,
            num_draft=run.num_draft,
            max_len=self.max_len,
            max_width=max(run.widths, default=1),
        )
        gen = torch.Generator().manual_seed(run.seed)
        context = torch.randint(0, target_cfg.vocab, (run.batch, run.context), generator=gen).to(
            device
        )
        with self.range(PREFILL, bs=run.batch, tokens=run.context):
            self.state.prefill(context)
        self.graphs = (
            PhaseGraphs(self.state, run.widths, with_decode=run.decode_steps > 0)
            if "graph" in run.modes
            else None
        )
        self.compiled = (
            CompiledVerify(
                self.state,
                backend=run.compile_backend,
                mode=run.compile_mode,
                fullgraph=run.compile_fullgraph,
            )
            if "compile" in run.modes
            else None
        )
        self.simulated = run.accept_len is not None

    # -- one step of each kind ---------------------------------------------------------------

    # One method per phase, so that capture hooks (``module:Workload.verify=verify``) can wrap
    # them in both modes when the workload's own ranges are off (``--no-ranges``).

    def draft(self, graph: bool) -> None:
        self.state.draft_begin()
        for _ in range(self.run_cfg.num_draft):
            self.graphs.draft_step.replay() if graph else self.state.draft_step()

    def verify(self, graph: bool, compiled: bool = False) -> torch.Tensor:
        if compiled:
            return self.compiled()
        return self.graphs.verify.replay() if graph else self.state.verify()

    def verify_flags(self, mode: str) -> tuple[bool, bool]:
        """(graph, compiled) of the verify forward in ``mode``: compiled verifies count as graph
        replays only where cudagraph trees really replay them."""
        if mode == "compile":
            return self.compiled.cudagraphs, True
        return mode == "graph", False

    def accept(self, logits: torch.Tensor, index: int) -> list[int]:
        if self.simulated:
            self.state.sim_accepted.copy_(self._sim_table[index])
        return self.state.accept(logits, self.simulated).tolist()  # the host sync of the iteration

    def draft_extend(self, graph: bool) -> None:
        self.graphs.draft_extend.replay() if graph else self.state.draft_extend()

    def spec_step(
        self, index: int, graph: bool, compiled: bool = False
    ) -> tuple[list[Any], list[int]]:
        """One iteration; ``compiled``: the verify forward compiled, the other phases eager."""
        k, bs, g = self.run_cfg.num_draft, self.run_cfg.batch, int(graph)
        c = 1 if compiled else None
        verify_graph = self.compiled.cudagraphs if compiled else graph
        marks = []
        with self.range(SPEC_STEP, payload=index, bs=bs, tokens=k + 1, graph=g, compile=c):
            marks.append(self.clock.mark())
            with self.range(DRAFT, payload=index, bs=bs, tokens=k, graph=g):
                self.draft(graph)
            marks.append(self.clock.mark())
            with self.range(
                VERIFY, payload=index, bs=bs, tokens=k + 1, graph=int(verify_graph), compile=c
            ):
                logits = self.verify(verify_graph, compiled)
            marks.append(self.clock.mark())
            with self.range(ACCEPT, payload=index, bs=bs, tokens=k + 1):
                accept_lens = self.accept(logits, index)
            marks.append(self.clock.mark())
            with self.range(DRAFT_EXTEND, payload=index, bs=bs, tokens=k + 1, graph=g):
                self.draft_extend(graph)
            marks.append(self.clock.mark())
        return marks, accept_lens

    def decode_step(self, index: int, graph: bool) -> list[Any]:
        marks = [self.clock.mark()]
        with self.range(DECODE, payload=index, bs=self.run_cfg.batch, tokens=1, graph=int(graph)):
            token = self.graphs.decode.replay() if graph else self.state.decode()
            token.tolist()
        marks.append(self.clock.mark())
        return marks

    def sweep_step(self, index: int, width: int, graph: bool) -> list[Any]:
        marks = [self.clock.mark()]
        with self.range(
            VERIFY, payload=index, bs=self.run_cfg.batch, tokens=width, graph=int(graph), sweep=1
        ):
            self.graphs.sweep[width].replay() if graph else self.state.verify_width(width)
        marks.append(self.clock.mark())
        self._sync()
        return marks

    # -- runs -----------------------------------------------------------------------------------

    def run_spec(self, mode: str, steps: int, seed: int) -> dict[str, Any]:
        return run_spec(self, mode, steps, seed)

    def run_decode(self, mode: str, steps: int) -> dict[str, Any]:
        return run_decode(self, mode, steps)

    def run_sweep(self, mode: str, steps: int) -> list[dict[str, Any]]:
        return run_sweep(self, mode, steps)

    def run_pipelined(self, mode: str, steps: int) -> dict[str, Any]:
        return run_pipelined(self, mode, steps)

    def run_mode(self, mode: str, *, warmup: bool) -> list[dict[str, Any]]:
        """Every run of one mode, in order; ``warmup``: a few unmeasured steps of each instead."""
        run, out = self.run_cfg, []
        spec_steps = (run.warmup if run.steps else 0) if warmup else run.steps
        if spec_steps:
            out.append(self.run_spec(mode, spec_steps, seed=run.seed + 1 if warmup else run.seed))
        if mode == "compile":  # only the verify forward is compiled: no decode or sweep of its own
            return out + self._pipelined(mode, warmup)
        decode_steps = min(run.warmup, run.decode_steps) if warmup else run.decode_steps
        if decode_steps:
            out.append(self.run_decode(mode, decode_steps))
        if run.sweep_steps and run.widths:
            out.extend(
                self.run_sweep(mode, (min(run.warmup, 2) or 1) if warmup else run.sweep_steps)
            )
        return out + self._pipelined(mode, warmup)

    def _pipelined(self, mode: str, warmup: bool) -> list[dict[str, Any]]:
        steps = (
            min(self.run_cfg.pipelined, max(self.run_cfg.warmup, 1))
            if warmup
            else self.run_cfg.pipelined
        )
        return [self.run_pipelined(mode, steps)] if steps else []

    def run_all(self) -> list[dict[str, Any]]:
        """Warm every run up (compiling, capturing graphs), then measure them all inside one
        profiler capture window."""
        run = self.run_cfg
        with torch.inference_mode():
            if self.compiled is not None:  # compile (and record its graphs) before the window
                for _ in range(3):
                    self.compiled()
                self.state.reset()
            if run.warmup:
                for mode in run.modes:
                    self.run_mode(mode, warmup=True)
            if self.compiled is not None:
                self.compiled.settle()
            self.tp.barrier()
            self._sync()
            self._profiler(start=True)
            try:
                results = [r for mode in run.modes for r in self.run_mode(mode, warmup=False)]
                self._sync()
            finally:
                self._profiler(start=False)
        add_speedups(results)
        return results

    def _tokens_head(self, count: int = 32) -> list[list[int]]:
        """The first tokens each sequence emitted: eager and graph runs (and greedy speculation
        and plain decoding) of the same seed must agree on them."""
        return [row[:count] for row in self.state.emitted()]

    def close(self) -> None:
        """Drop the graphs (and with them their NCCL work) before the process group goes."""
        self._sync()
        self.graphs = None

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _profiler(self, start: bool) -> None:
        if self.device.type == "cuda":
            cudart = torch.cuda.cudart()
            (cudart.cudaProfilerStart if start else cudart.cudaProfilerStop)()

    def describe(self) -> dict[str, Any]:
        run = self.run_cfg
        acceptance = None
        if self.simulated:
            geometric = run.accept_method == "geometric"
            acceptance = {
                "method": run.accept_method,
                "seed": run.seed,
                "alpha": solve_alpha(run.accept_len, run.num_draft) if geometric else None,
                "survival": survival_curve(run.accept_len, run.num_draft, run.accept_method),
            }
        return {
            "run": run.to_json(),
            "target": self.target_cfg.to_json(),
            "draft": self.draft_cfg.to_json(),
            "dtype": str(self.dtype).removeprefix("torch."),
            "device": self.device.type,
            "tp": self.tp.world,
            "rank": self.tp.rank,
            "max_len": self.max_len,
            "moe_impl": self.target_model.moe_impl,
            "simulated_acceptance": acceptance,
            "compile": self.compiled.describe() if self.compiled is not None else None,
        }


def environment(device: torch.device) -> dict[str, Any]:
    import importlib.util
    import platform

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "host": platform.node(),
        # without the nvtx package ranges go to NVTX's default domain, without payload
        "nvtx_backend": "nvtx" if importlib.util.find_spec("nvtx") else "torch.cuda.nvtx",
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env |= {
            "gpu": props.name,
            "gpu_count": torch.cuda.device_count(),
            "capability": f"{props.major}.{props.minor}",
            "sms": props.multi_processor_count,
            "memory_gib": round(props.total_memory / 2**30, 1),
        }
        try:
            env["cuda_driver_api"] = torch._C._cuda_getDriverVersion()
        except Exception:
            pass
        try:
            env["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:
            pass
    return env
