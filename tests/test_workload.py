"""The speculative-decoding workload (verifyprof.workload) on the CPU: model, phases, ranges,
summary."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from verifyprof.contracts import ranges
from verifyprof.workload.__main__ import main
from verifyprof.workload.accept import accepted_drafts, solve_alpha
from verifyprof.workload.config import TINY, TINY_DRAFT, RunConfig
from verifyprof.workload.model import DecoderLM
from verifyprof.workload.moe import grouped_loop, grouped_mm
from verifyprof.workload.runner import Workload
from verifyprof.workload.spec import SpecState
from verifyprof.workload.tp import MULTICAST_OFF

REPO = Path(__file__).resolve().parents[1]
CPU = torch.device("cpu")
TINY_MOE = dataclasses.replace(TINY, moe_experts=8, moe_topk=2)
TINY_ARGS = ["--preset", "tiny", "--device", "cpu", "--context", "16", "--warmup", "1"]


def model(cfg=TINY) -> DecoderLM:
    return DecoderLM(cfg, device=CPU, dtype=torch.float32)


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


@pytest.mark.parametrize("cfg", [TINY, TINY_MOE], ids=["dense", "moe"])
@torch.inference_mode()
def test_verify_forward_equals_sequential_decode_forwards(cfg):
    lm = model(cfg)
    lm.allocate(2, 128)
    lm(torch.randint(0, cfg.vocab, (2, 20)), torch.zeros(2, dtype=torch.int64))
    start = torch.tensor([20, 17])  # sequences of different lengths in one batch
    tokens = torch.randint(0, cfg.vocab, (2, 4))
    verify = lm(tokens, start).clone()
    sequential = torch.cat([lm(tokens[:, i : i + 1], start + i) for i in range(4)], dim=1)
    torch.testing.assert_close(verify, sequential, rtol=1e-4, atol=1e-5)


@torch.inference_mode()
def test_moe_grouped_gemm_matches_one_matmul_per_expert():
    gen = torch.Generator().manual_seed(3)
    x, w = torch.randn(12, 16, generator=gen), torch.randn(5, 16, 8, generator=gen)
    counts = torch.tensor([3, 0, 6, 2, 1])
    expected = torch.cat([x[0:3] @ w[0], x[3:9] @ w[2], x[9:11] @ w[3], x[11:12] @ w[4]])
    torch.testing.assert_close(grouped_loop(x, w, counts), expected)
    torch.testing.assert_close(grouped_mm(x, w, counts), expected)


@torch.inference_mode()
def test_greedy_speculation_emits_exactly_the_targets_greedy_decode():
    # A drafter that is the target's first layer: it agrees sometimes, so both accept and reject
    # paths run.
    state = spec_state(draft_cfg=dataclasses.replace(TINY, layers=1))
    accept_lens = [a for _ in range(20) for a in spec_iteration(state)]
    speculative = state.emitted()
    state.reset()
    for _ in range(80):
        state.decode()
    plain = state.emitted()
    assert len(set(accept_lens)) >= 3, accept_lens  # several accept lengths occurred
    assert all(row == plain[b][: len(row)] for b, row in enumerate(speculative))


@torch.inference_mode()
def test_a_drafter_identical_to_the_target_gets_every_draft_accepted():
    state = spec_state(draft_cfg=TINY, k=3)
    assert [spec_iteration(state) for _ in range(5)] == [[4, 4]] * 5


@pytest.mark.parametrize("method", ["geometric", "fixed"])
@pytest.mark.parametrize("accept_len", [1.0, 1.6, 2.0, 3.3, 4.0])
def test_simulated_acceptance_has_the_requested_mean(method, accept_len):
    counts = accepted_drafts(accept_len, 3, steps=400, batch=2, seed=5, method=method)
    assert counts.min() >= 0 and counts.max() <= 3
    assert abs(counts.double().mean().item() + 1 - accept_len) < 0.01


def test_simulated_acceptance_is_deterministic_per_seed():
    a = accepted_drafts(2.2, 4, steps=50, batch=3, seed=1)
    assert torch.equal(a, accepted_drafts(2.2, 4, steps=50, batch=3, seed=1))
    assert not torch.equal(a, accepted_drafts(2.2, 4, steps=50, batch=3, seed=2))


def test_geometric_acceptance_survival_follows_alpha_per_position():
    alpha = solve_alpha(2.5, 4)
    assert sum(alpha**i for i in range(5)) == pytest.approx(2.5)
    counts = accepted_drafts(2.5, 4, steps=2000, batch=1, seed=0)
    survival = [(counts >= i).double().mean().item() for i in range(1, 5)]
    assert survival == pytest.approx([alpha**i for i in range(1, 5)], abs=0.01)


@torch.inference_mode()
def test_workload_accepts_the_simulated_count_each_step():
    run = RunConfig(
        steps=12,
        warmup=0,
        decode_steps=0,
        widths=(),
        sweep_steps=0,
        accept_len=2.5,
        context=16,
        batch=2,
        seed=4,
    )
    workload = Workload(TINY, TINY_DRAFT, run, device=CPU, dtype=torch.float32)
    result = workload.run_spec("eager", 12, seed=4)
    expected = (accepted_drafts(2.5, 3, 12, 2, seed=4) + 1).tolist()
    assert result["per_step"]["accept_len"] == expected
    assert result["tokens"] == sum(map(sum, expected))
    assert [len(row) for row in result["tokens_head"]] == [
        min(32, sum(col)) for col in zip(*expected)
    ]


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


@torch.inference_mode()
def test_graph_mode_orchestration_emits_the_same_tokens_as_eager(monkeypatch):
    from verifyprof.workload import graphs

    monkeypatch.setattr(graphs, "Graph", ReplayedOnCPU)
    run = RunConfig(
        steps=10,
        warmup=0,
        decode_steps=6,
        widths=(2, 5),
        sweep_steps=1,
        accept_len=2.4,
        context=16,
        batch=2,
    )
    workload = Workload(TINY, TINY_DRAFT, run, device=CPU, dtype=torch.float32)
    eager = [workload.run_spec("eager", 10, seed=0), workload.run_decode("eager", 6)]
    workload.graphs = graphs.PhaseGraphs(workload.state, run.widths)
    graph = [workload.run_spec("graph", 10, seed=0), workload.run_decode("graph", 6)]
    for e, g in zip(eager, graph):
        assert g["graph"] and not e["graph"]
        assert g["tokens_head"] == e["tokens_head"] and g["tokens"] == e["tokens"]
    assert graph[0]["per_step"]["accept_len"] == eager[0]["per_step"]["accept_len"]
    assert [r["width"] for r in workload.run_sweep("graph", 1)] == [2, 5]


def _range_names(prof) -> list[str]:
    events = [e for e in prof.events() if e.name.startswith("verifyprof.")]
    return [e.name for e in sorted(events, key=lambda e: e.time_range.start)]


def test_ranges_are_emitted_in_the_documented_order(tmp_path):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run_main(
            tmp_path,
            "--steps",
            "2",
            "--decode-steps",
            "2",
            "--widths",
            "1,3",
            "--sweep-steps",
            "1",
            "--warmup",
            "0",
        )
    step = [
        "verifyprof.spec_step bs=1 tokens=4 graph=0",
        "verifyprof.draft bs=1 tokens=3 graph=0",
        "verifyprof.verify bs=1 tokens=4 graph=0",
        "verifyprof.accept bs=1 tokens=4",
        "verifyprof.draft_extend bs=1 tokens=4 graph=0",
    ]
    decode = "verifyprof.decode bs=1 tokens=1 graph=0"
    sweep = [
        "verifyprof.verify bs=1 tokens=1 graph=0 sweep=1",
        "verifyprof.verify bs=1 tokens=3 graph=0 sweep=1",
    ]
    assert _range_names(prof) == [
        "verifyprof.prefill bs=1 tokens=16",
        *step,
        *step,
        decode,
        decode,
        *sweep,
    ]
    assert ranges.split_text(step[2]) == (ranges.VERIFY, {"bs": "1", "tokens": "4", "graph": "0"})


def test_phase_ranges_nest_inside_their_spec_step(tmp_path):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run_main(tmp_path, "--steps", "3", "--decode-steps", "0", "--widths", "", "--warmup", "0")
    events = sorted(
        (e for e in prof.events() if e.name.startswith("verifyprof.")),
        key=lambda e: e.time_range.start,
    )
    steps = [e for e in events if e.name.startswith(ranges.SPEC_STEP)]
    phases = [e for e in events if not e.name.startswith((ranges.SPEC_STEP, ranges.PREFILL))]
    assert len(steps) == 3 and len(phases) == 12
    for i, step in enumerate(steps):
        for phase in phases[4 * i : 4 * i + 4]:
            assert (
                step.time_range.start
                <= phase.time_range.start
                <= phase.time_range.end
                <= step.time_range.end
            )


def test_no_ranges_flag_emits_no_range(tmp_path):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run_main(
            tmp_path,
            "--steps",
            "2",
            "--decode-steps",
            "1",
            "--widths",
            "2",
            "--sweep-steps",
            "1",
            "--no-ranges",
        )
    assert _range_names(prof) == []


def test_summary_has_the_documented_fields(tmp_path):
    summary = run_main(
        tmp_path,
        "--steps",
        "4",
        "--decode-steps",
        "3",
        "--widths",
        "1,2",
        "--sweep-steps",
        "2",
        "--accept-len",
        "2.0",
    )
    assert summary["schema"] == "verifyprof.workload/1"
    assert {
        "run",
        "target",
        "draft",
        "dtype",
        "device",
        "tp",
        "max_len",
        "moe_impl",
        "simulated_acceptance",
    } <= set(summary["config"])
    assert {"python", "torch", "cuda"} <= set(summary["env"])
    spec, decode, *sweep = summary["runs"]
    assert {
        "mode",
        "graph",
        "bs",
        "num_draft",
        "verify_tokens",
        "steps",
        "accept",
        "accept_len",
        "accept_len_target",
        "tokens",
        "tokens_per_s",
        "step_ms",
        "draft_ms",
        "verify_ms",
        "accept_ms",
        "draft_extend_ms",
        "speedup_vs_decode",
        "tokens_head",
        "per_step",
    } <= set(spec)
    assert (spec["kind"], spec["mode"], spec["steps"], spec["verify_tokens"]) == (
        "spec",
        "eager",
        4,
        4,
    )
    assert {"n", "mean", "median", "p90", "min", "max"} == set(spec["verify_ms"])
    assert spec["verify_ms"]["n"] == 4 and spec["verify_ms"]["median"] > 0
    assert spec["tokens"] == sum(map(sum, spec["per_step"]["accept_len"]))
    assert (decode["kind"], decode["steps"], decode["decode_ms"]["n"]) == ("decode", 3, 3)
    assert [(r["kind"], r["width"], r["verify_ms"]["n"]) for r in sweep] == [
        ("verify_sweep", 1, 2),
        ("verify_sweep", 2, 2),
    ]


def test_greedy_summary_reports_that_speculation_matched_plain_decoding(tmp_path):
    summary = run_main(
        tmp_path, "--steps", "6", "--decode-steps", "10", "--widths", "", "--accept-len", "greedy"
    )
    spec = summary["runs"][0]
    assert spec["accept"] == "greedy" and spec["accept_len_target"] is None
    assert spec["greedy_matches_decode"] is True


def test_moe_workload_runs_end_to_end(tmp_path):
    summary = run_main(
        tmp_path,
        "--moe-experts",
        "8",
        "--moe-topk",
        "2",
        "--steps",
        "3",
        "--decode-steps",
        "2",
        "--widths",
        "1,4",
        "--sweep-steps",
        "1",
    )
    assert summary["config"]["target"]["moe_experts"] == 8
    assert summary["config"]["moe_impl"] in ("grouped_mm", "loop")
    assert [r["kind"] for r in summary["runs"]] == [
        "spec",
        "decode",
        "verify_sweep",
        "verify_sweep",
    ]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--accept-len", "5"], "accept_len 5.0 outside"),
        (["--mode", "graph"], "graph mode needs a CUDA device"),
        (["--mode", "fast"], "unknown mode"),
        (["--heads", "3"], "not divisible"),
        pytest.param(
            ["--device", "cuda"],
            "CUDA is not available",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here"),
        ),
    ],
)
def test_bad_arguments_exit_2_with_one_line(args, message, tmp_path, capsys):
    assert main([*TINY_ARGS, *args, "--out", str(tmp_path / "s.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert not (tmp_path / "s.json").exists()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_tensor_parallel_world_size_1_runs_through_the_process_group(tmp_path, monkeypatch):
    import torch.distributed as dist

    for name, value in {
        "RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(_free_port()),
    }.items():
        monkeypatch.setenv(name, value)
    for name in MULTICAST_OFF:
        monkeypatch.setenv(name, "1" if name == "NCCL_NVLS_ENABLE" else "0")
    summary = run_main(
        tmp_path, "--steps", "3", "--decode-steps", "2", "--widths", "2", "--sweep-steps", "1"
    )
    assert summary["config"]["tp"] == 1
    assert not dist.is_initialized()  # the workload created and destroyed its group
    assert {name: os.environ[name] for name in MULTICAST_OFF} == MULTICAST_OFF


def test_tensor_parallel_2_ranks_on_gloo_emit_the_single_process_tokens(tmp_path):
    args = [
        *TINY_ARGS,
        "--steps",
        "6",
        "--decode-steps",
        "12",
        "--widths",
        "",
        "--accept-len",
        "greedy",
    ]
    single = tmp_path / "tp1.json"
    assert main([*args, "--out", str(single)]) == 0
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--master-port",
            str(_free_port()),
            "-m",
            "verifyprof.workload",
            *args,
            "--out",
            str(tmp_path / "tp2.json"),
        ],
        check=True,
        env=env,
        cwd=tmp_path,
        timeout=240,
        capture_output=True,
    )
    tp1 = json.loads(single.read_text())
    tp2, tp2_rank1 = (
        json.loads((tmp_path / name).read_text()) for name in ("tp2.json", "tp2.rank1.json")
    )
    assert (tp2["config"]["tp"], tp2_rank1["config"]["rank"]) == (2, 1)
    for summary in (tp2, tp2_rank1):
        assert [r["tokens_head"] for r in summary["runs"]] == [
            r["tokens_head"] for r in tp1["runs"]
        ]


def test_trace_manifest_carries_the_commands_results_and_summary(tmp_path):
    from verifyprof.workload import manifest

    directory = tmp_path / "workload-dense-eager"
    directory.mkdir()
    run_main(
        directory, "--steps", "3", "--decode-steps", "2", "--widths", "1", "--sweep-steps", "1"
    )
    (directory / "trace.sqlite.gz").write_bytes(b"\x1f\x8b" + b"\0" * 100)
    profiler = ["nsys", "profile", "-o", "trace"]
    target = [sys.executable, "-m", "verifyprof.workload", "--steps", "3"]
    assert manifest.main([str(directory), "--target-from", "4", "--", *profiler, *target]) == 0
    doc = json.loads((directory / "manifest.json").read_text())
    assert doc["schema"] == "verifyprof.capture/1" and doc["name"] == "workload-dense-eager"
    assert doc["command"]["profiler"] == profiler + target and doc["command"]["target"] == target
    spec = doc["workload_summary"]["runs"][0]
    assert (
        doc["results"]["accept_len"] == spec["accept_len"]
        and doc["results"]["tokens_per_s"] == spec["tokens_per_s"]
    )
    assert doc["traces"] == [{"path": "trace.sqlite.gz", "kind": "nsys-sqlite", "bytes": 102}]
    assert doc["versions"]["torch"] == torch.__version__ and doc["warnings"] == []


def test_trace_manifest_fails_when_a_gzipped_export_exceeds_16_mib(tmp_path, capsys):
    from verifyprof.workload import manifest

    with open(tmp_path / "trace.sqlite.gz", "wb") as f:
        f.truncate(manifest.MAX_GZ_BYTES + 1)
    assert manifest.main([str(tmp_path)]) == 1
    assert "over 16 MiB" in capsys.readouterr().err


# --- pipelined verifies (no host sync between steps) and the torch.compile'd verify ----------

PIPELINED = "verifyprof.verify bs=1 tokens=4 graph=0 pipelined=1"


def test_pipelined_verifies_each_get_their_own_range(tmp_path):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run_main(
            tmp_path,
            "--steps",
            "0",
            "--decode-steps",
            "0",
            "--widths",
            "",
            "--pipelined",
            "3",
            "--warmup",
            "0",
        )
    assert _range_names(prof) == [
        "verifyprof.prefill bs=1 tokens=16",
        PIPELINED,
        PIPELINED,
        PIPELINED,
    ]
    assert ranges.split_text(PIPELINED) == (
        ranges.VERIFY,
        {"bs": "1", "tokens": "4", "graph": "0", "pipelined": "1"},
    )


@torch.inference_mode()
def test_pipelined_verifies_are_queued_without_a_host_sync_between_them(monkeypatch):
    run = RunConfig(
        steps=0, warmup=0, decode_steps=0, widths=(), sweep_steps=0, pipelined=5, context=16
    )
    workload = Workload(TINY, TINY_DRAFT, run, device=CPU, dtype=torch.float32)
    calls = []
    monkeypatch.setattr(workload, "_sync", lambda: calls.append("sync"))
    monkeypatch.setattr(workload, "accept", lambda *a: calls.append("accept"))
    original_verify = workload.verify
    monkeypatch.setattr(
        workload, "verify", lambda *a: calls.append("verify") or original_verify(*a)
    )
    workload.run_pipelined("eager", 5)
    assert calls == ["sync", *["verify"] * 5, "sync"]  # one sync before the queue, one after


def test_pipelined_summary_tiles_the_gpu_window_with_per_step_occupancy(tmp_path):
    summary = run_main(
        tmp_path, "--steps", "0", "--decode-steps", "0", "--widths", "", "--pipelined", "6"
    )
    (run,) = summary["runs"]
    assert (run["kind"], run["mode"], run["steps"], run["width"], run["graph"], run["compile"]) == (
        "verify_pipelined",
        "eager",
        6,
        4,
        False,
        False,
    )
    per_step = run["per_step"]
    assert [len(per_step[k]) for k in ("verify_ms", "gpu_gap_ms", "host_ms")] == [6, 5, 6]
    assert run["verify_ms"]["n"] == 6 and min(per_step["verify_ms"]) > 0
    # each step's occupancy (start event to end event) plus the gaps between steps is the whole
    # window
    assert sum(per_step["verify_ms"]) + sum(per_step["gpu_gap_ms"]) == pytest.approx(
        run["gpu_elapsed_ms"], rel=1e-6
    )
    # the host's time inside a step's range never exceeds the events around it (on the CPU: the same
    # clock)
    assert all(h <= v for h, v in zip(per_step["host_ms"], per_step["verify_ms"]))
    assert {"gpu_elapsed_ms", "host_elapsed_ms", "host_wait_ms"} <= set(run)


@torch.inference_mode()
def test_pipelined_graph_replays_compute_the_eager_logits(monkeypatch):
    from verifyprof.workload import graphs

    monkeypatch.setattr(graphs, "Graph", ReplayedOnCPU)
    run = RunConfig(
        steps=0, warmup=0, decode_steps=0, widths=(), sweep_steps=0, pipelined=3, context=16
    )
    workload = Workload(TINY, TINY_DRAFT, run, device=CPU, dtype=torch.float32)
    workload.graphs = graphs.PhaseGraphs(workload.state, (), with_decode=False)
    eager = workload.state.verify().clone()
    result = workload.run_pipelined("graph", 3)
    assert result["graph"] and result["verify_ms"]["n"] == 3
    assert torch.equal(workload.graphs.verify.output, eager)


def test_a_run_with_nothing_to_measure_exits_2(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert (
        main([*TINY_ARGS, "--steps", "0", "--decode-steps", "0", "--widths", "", "--out", str(out)])
        == 2
    )
    assert "nothing to measure" in capsys.readouterr().err


def test_pipelined_only_manifest_reports_the_pipelined_verify_time(tmp_path):
    from verifyprof.workload import manifest

    directory = tmp_path / "workload-dense-pipelined-eager"
    directory.mkdir()
    summary = run_main(
        directory, "--steps", "0", "--decode-steps", "0", "--widths", "", "--pipelined", "3"
    )
    assert (
        manifest.main([str(directory), "--script", "traces/capture_pipelined.sh", "--", "python"])
        == 0
    )
    doc = json.loads((directory / "manifest.json").read_text())
    run = summary["runs"][0]
    assert doc["results"] == {
        "verify_ms_median": run["verify_ms"]["median"],
        "mode": "eager",
        "pipelined_verify_ct": 3,
    }
    assert doc["command"]["script"] == "traces/capture_pipelined.sh"


COMPILE_ARGS = [
    "--compile-backend",
    "eager",
]  # Dynamo on the CPU without Inductor's C++ build: seconds


@torch.inference_mode()
def test_compiled_verify_computes_the_eager_logits():
    run = RunConfig(
        modes=("eager", "compile"),
        steps=1,
        warmup=0,
        decode_steps=0,
        widths=(),
        sweep_steps=0,
        context=16,
        compile_backend="eager",
    )
    workload = Workload(TINY, TINY_DRAFT, run, device=CPU, dtype=torch.float32)
    assert torch.equal(workload.verify(False, compiled=True), workload.state.verify())
    assert workload.compiled.fullgraph and workload.compiled.fullgraph_error is None


@torch.inference_mode()
def test_compile_mode_speculation_emits_the_same_tokens_as_eager():
    run = RunConfig(
        modes=("eager", "compile"),
        steps=8,
        warmup=0,
        decode_steps=0,
        widths=(),
        sweep_steps=0,
        context=16,
        accept_len=None,
        batch=2,
        compile_backend="eager",
    )
    workload = Workload(TINY, TINY_DRAFT, run, device=CPU, dtype=torch.float32)
    eager, compiled = workload.run_spec("eager", 8, seed=0), workload.run_spec("compile", 8, seed=0)
    assert compiled["compile"] and not eager["compile"]
    assert compiled["tokens_head"] == eager["tokens_head"]
    assert compiled["per_step"]["accept_len"] == eager["per_step"]["accept_len"]


def test_compile_mode_ranges_carry_compile_1_and_skip_decode_and_sweep(tmp_path):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run_main(
            tmp_path,
            "--mode",
            "eager,compile",
            *COMPILE_ARGS,
            "--steps",
            "1",
            "--decode-steps",
            "1",
            "--widths",
            "2",
            "--sweep-steps",
            "1",
            "--pipelined",
            "1",
            "--warmup",
            "0",
        )
    eager = [
        "verifyprof.spec_step bs=1 tokens=4 graph=0",
        "verifyprof.draft bs=1 tokens=3 graph=0",
        "verifyprof.verify bs=1 tokens=4 graph=0",
        "verifyprof.accept bs=1 tokens=4",
        "verifyprof.draft_extend bs=1 tokens=4 graph=0",
        "verifyprof.decode bs=1 tokens=1 graph=0",
        "verifyprof.verify bs=1 tokens=2 graph=0 sweep=1",
        PIPELINED,
    ]
    compiled = [
        "verifyprof.spec_step bs=1 tokens=4 graph=0 compile=1",
        "verifyprof.draft bs=1 tokens=3 graph=0",
        "verifyprof.verify bs=1 tokens=4 graph=0 compile=1",
        "verifyprof.accept bs=1 tokens=4",
        "verifyprof.draft_extend bs=1 tokens=4 graph=0",
        "verifyprof.verify bs=1 tokens=4 graph=0 compile=1 pipelined=1",
    ]
    assert _range_names(prof) == ["verifyprof.prefill bs=1 tokens=16", *eager, *compiled]


def test_compile_summary_records_eager_and_compiled_verify_timings(tmp_path):
    summary = run_main(
        tmp_path,
        "--mode",
        "eager,compile",
        *COMPILE_ARGS,
        "--steps",
        "3",
        "--decode-steps",
        "0",
        "--widths",
        "",
    )
    eager, compiled = summary["runs"]
    assert [(r["kind"], r["mode"], r["verify_ms"]["n"]) for r in summary["runs"]] == [
        ("spec", "eager", 3),
        ("spec", "compile", 3),
    ]
    assert compiled["verify_ms_eager_over_compile"] == pytest.approx(
        eager["verify_ms"]["median"] / compiled["verify_ms"]["median"]
    )
    info = summary["config"]["compile"]
    assert (info["backend"], info["fullgraph"], info["cudagraphs"]) == ("eager", True, False)
    assert info["first_call_s"] > 0 and info["calls"] >= 3  # compiled before the measured steps


def test_an_unknown_compile_backend_exits_2_with_one_line(tmp_path, capsys):
    assert (
        main(
            [
                *TINY_ARGS,
                "--mode",
                "compile",
                "--compile-backend",
                "nope",
                "--out",
                str(tmp_path / "s.json"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert "nope" in err and "\n" not in err


# --- the committed H200 traces of these modes (traces/README.md): the data others test against ---

TRACES = REPO / "traces"


def _nsys_projection_ns(folder: Path, range_text: str) -> int:
    import csv

    with open(folder / "stats_nvtx_gpu_proj_sum.csv", newline="") as f:
        row = next(
            r for r in csv.DictReader(f) if r["Range"].partition(":")[2] == range_text
        )  # DOMAIN:text
    return int(row["Total Proj Time (ns)"])


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_committed_pipelined_occupancy_agrees_with_nsys_projection(mode):
    folder = TRACES / f"workload-dense-pipelined-{mode}"
    (run,) = json.loads((folder / "summary.json").read_text())["runs"]
    text = f"verifyprof.verify bs=1 tokens=4 graph={int(mode == 'graph')} pipelined=1"
    projected_ms = _nsys_projection_ns(folder, text) / 1e6
    assert run["steps"] == 30
    assert sum(run["per_step"]["verify_ms"]) == pytest.approx(projected_ms, rel=0.05)


def test_committed_pipelined_graph_host_ran_ahead_of_the_gpu():
    (run,) = json.loads((TRACES / "workload-dense-pipelined-graph" / "summary.json").read_text())[
        "runs"
    ]
    assert (
        run["host_elapsed_ms"] < run["gpu_elapsed_ms"] / 2
    )  # the case breakdown books as launch_gap
    assert (
        max(run["per_step"]["gpu_gap_ms"]) < 0.05 * run["verify_ms"]["median"]
    )  # the GPU never idled


def test_committed_compile_pair_measured_eager_graph_and_compiled_verify_in_one_process():
    summary = json.loads((TRACES / "workload-dense-compile" / "summary.json").read_text())
    info = summary["config"]["compile"]
    assert (info["mode"], info["fullgraph"], info["cudagraphs"], info["cudagraph_skips"]) == (
        "reduce-overhead",
        True,
        True,
        0,
    )
    verify = {r["mode"]: r["verify_ms"]["median"] for r in summary["runs"] if r["kind"] == "spec"}
    assert verify["compile"] < verify["graph"] < verify["eager"]
    kernels = (TRACES / "workload-dense-compile" / "stats_cuda_gpu_kern_sum.csv").read_text()
    assert "triton_" in kernels  # Inductor's fused kernels are in the trace
