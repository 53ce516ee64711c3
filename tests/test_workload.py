"""The speculative-decoding workload (verifyprof.workload) on the CPU: model, phases, ranges,
summary, tensor parallelism and the trace manifest (pipelined and compiled verifies and the
committed traces of those modes: test_workload_modes.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys

import pytest
import torch
from workload_helpers import (
    REPO,
    TINY_ARGS,
    TINY_MOE,
    ReplayedOnCPU,
    model,
    range_names,
    run_main,
    spec_iteration,
    spec_state,
    tiny_workload,
)

from verifyprof.contracts import ranges
from verifyprof.workload.__main__ import main
from verifyprof.workload.accept import accepted_drafts, solve_alpha
from verifyprof.workload.config import TINY
from verifyprof.workload.moe import grouped_loop, grouped_mm
from verifyprof.workload.tp import MULTICAST_OFF


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
    workload = tiny_workload(steps=12, accept_len=2.5, batch=2, seed=4)
    result = workload.run_spec("eager", 12, seed=4)
    expected = (accepted_drafts(2.5, 3, 12, 2, seed=4) + 1).tolist()
    assert result["per_step"]["accept_len"] == expected
    assert result["tokens"] == sum(map(sum, expected))
    assert [len(row) for row in result["tokens_head"]] == [
        min(32, sum(col)) for col in zip(*expected)
    ]


@torch.inference_mode()
def test_graph_mode_orchestration_emits_the_same_tokens_as_eager(monkeypatch):
    from verifyprof.workload import graphs

    monkeypatch.setattr(graphs, "Graph", ReplayedOnCPU)
    workload = tiny_workload(
        steps=10, decode_steps=6, widths=(2, 5), sweep_steps=1, accept_len=2.4, batch=2
    )
    run = workload.run_cfg
    eager = [workload.run_spec("eager", 10, seed=0), workload.run_decode("eager", 6)]
    workload.graphs = graphs.PhaseGraphs(workload.state, run.widths)
    graph = [workload.run_spec("graph", 10, seed=0), workload.run_decode("graph", 6)]
    for e, g in zip(eager, graph):
        assert g["graph"] and not e["graph"]
        assert g["tokens_head"] == e["tokens_head"] and g["tokens"] == e["tokens"]
    assert graph[0]["per_step"]["accept_len"] == eager[0]["per_step"]["accept_len"]
    assert [r["width"] for r in workload.run_sweep("graph", 1)] == [2, 5]


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
    assert range_names(prof) == [
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
    assert range_names(prof) == []


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
    from verifyprof.workload import write_manifest

    directory = tmp_path / "workload-dense-eager"
    directory.mkdir()
    run_main(
        directory, "--steps", "3", "--decode-steps", "2", "--widths", "1", "--sweep-steps", "1"
    )
    (directory / "trace.sqlite.gz").write_bytes(b"\x1f\x8b" + b"\0" * 100)
    profiler = ["nsys", "profile", "-o", "trace"]
    target = [sys.executable, "-m", "verifyprof.workload", "--steps", "3"]
    assert (
        write_manifest.main([str(directory), "--target-from", "4", "--", *profiler, *target]) == 0
    )
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
    from verifyprof.workload import write_manifest

    with open(tmp_path / "trace.sqlite.gz", "wb") as f:
        f.truncate(write_manifest.MAX_GZ_BYTES + 1)
    assert write_manifest.main([str(tmp_path)]) == 1
    assert "over 16 MiB" in capsys.readouterr().err
