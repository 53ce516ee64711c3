"""The Kineto (PyTorch profiler JSON) reader, on the real public traces.

Facts come from shared/traces/public/PROVENANCE.md and from an independent plain-``json``
computation inside each test; multi-rank inputs are built from real traces with rewritten
rank / base time. Bad inputs (one-line TraceError, file untouched): tests/test_kineto_bad_input.py.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from functools import lru_cache
from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pytest
from conftest import PUBLIC  # tests/data/public: copies of the shared public traces

from verifyprof.trace import load_trace
from verifyprof.trace.events import (
    API_KIND_DRIVER,
    API_KIND_RUNTIME,
    COPY_KIND_MEMCPY,
    COPY_KIND_MEMSET,
    RANGE_KIND_ANNOTATION,
    RANGE_KIND_GPU_ANNOTATION,
)
from verifyprof.trace.kineto.reader import read_kineto
from verifyprof.trace.kineto.tables import strip_abi_suffix
from verifyprof.trace.nesting import nesting_depth

KINETO = PUBLIC / "kineto"
A100 = KINETO / "hta_nccl_data_a100_rank0of2.json.gz"
B200 = KINETO / "tracelens_b200_vllm_moe_eager_trace.json.gz"
MI300X = KINETO / "tracelens_mi300x_sglang_qwen3-8b_decode.json.gz"
ALL_PUBLIC = sorted(KINETO.glob("*.json*"))


@lru_cache(maxsize=None)
def plain(path: Path) -> dict:
    """The file as the standard library reads it: the independent oracle."""
    with gzip.open(path, "rt") as handle:
        return json.load(handle)


def plain_events(path: Path, *cats: str) -> list[dict]:
    return [e for e in plain(path)["traceEvents"] if e.get("cat") in cats and e.get("ph") == "X"]


@lru_cache(maxsize=None)
def read(path: Path):
    return read_kineto([path])


def ns(us: float) -> int:
    return round(us * 1000)


def digest(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def write_trace(path: Path, doc: dict) -> Path:
    data = json.dumps(doc).encode()
    path.write_bytes(
        gzip.compress(data, compresslevel=1) if path.name.endswith(".gz") else data
    )  # level 9: 10x the time
    return path


def test_public_kineto_traces_are_all_covered():
    assert {p.name for p in ALL_PUBLIC} >= {A100.name, B200.name, MI300X.name}


@pytest.mark.parametrize("path", ALL_PUBLIC, ids=lambda p: p.name)
def test_every_public_trace_loads_and_validates(path):
    trace = read(path)
    trace.validate()
    assert trace.format == "kineto" and trace.source == [path]
    assert len(trace.kernels) > 0 and len(trace.devices) >= 1 and len(trace.processes) >= 1


@pytest.mark.parametrize("path", ALL_PUBLIC, ids=lambda p: p.name)
def test_kernels_match_a_plain_json_reading(path):
    expected = plain_events(path, "kernel")
    kernels = read(path).kernels
    assert len(kernels) == len(expected)
    starts = np.array([ns(e["ts"]) for e in expected])
    durations = np.array([ns(e["dur"]) for e in expected])
    assert np.array_equal(np.sort(kernels["start"].to_numpy()), np.sort(starts))
    assert int((kernels["end"] - kernels["start"]).sum()) == int(durations.sum())
    assert int(kernels["end"].max()) == int((starts + durations).max())
    assert sorted(kernels["correlation"].tolist()) == sorted(
        e["args"]["correlation"] for e in expected
    )
    assert sorted(kernels["stream"].tolist()) == sorted(e["args"]["stream"] for e in expected)


@pytest.mark.parametrize("path", ALL_PUBLIC, ids=lambda p: p.name)
def test_kernel_time_per_name_matches_plain_json(path):
    trace = read(path)
    ours = pd.Series(
        (trace.kernels["end"] - trace.kernels["start"]).to_numpy(), index=trace.names("kernels")
    )
    ours = ours.groupby(level=0).sum().sort_index()
    theirs = pd.Series({}, dtype=np.int64)
    for e in plain_events(path, "kernel"):
        theirs[e["name"]] = theirs.get(e["name"], 0) + ns(e["dur"])
    assert ours.to_dict() == theirs.sort_index().to_dict()


@pytest.mark.parametrize("path", ALL_PUBLIC, ids=lambda p: p.name)
def test_copies_match_plain_json(path):
    copies = read(path).copies
    memcpy = plain_events(path, "gpu_memcpy")
    memset = plain_events(path, "gpu_memset")
    kind = copies["kind"].to_numpy()
    assert (kind == COPY_KIND_MEMCPY).sum() == len(memcpy)
    assert (kind == COPY_KIND_MEMSET).sum() == len(memset)
    assert int(copies["bytes"].sum()) == sum(e["args"]["bytes"] for e in memcpy + memset)
    assert int((copies["end"] - copies["start"]).sum()) == sum(
        ns(e["dur"]) for e in memcpy + memset
    )


@pytest.mark.parametrize("path", ALL_PUBLIC, ids=lambda p: p.name)
def test_api_calls_match_plain_json(path):
    api = read(path).api
    runtime = plain_events(path, "cuda_runtime")
    driver = plain_events(path, "cuda_driver")
    assert (api["kind"] == API_KIND_RUNTIME).sum() == len(runtime)
    assert (api["kind"] == API_KIND_DRIVER).sum() == len(driver)
    assert sorted(api["correlation"].tolist()) == sorted(
        e["args"]["correlation"] for e in runtime + driver
    )
    assert int((api["end"] - api["start"]).sum()) == sum(ns(e["dur"]) for e in runtime + driver)


@pytest.mark.parametrize("path", ALL_PUBLIC, ids=lambda p: p.name)
def test_typed_and_generic_decoders_give_the_same_trace(path):
    fast, generic = read_kineto([path]), read_kineto([path], fast=False)
    for table in ("kernels", "copies", "api", "ranges", "devices", "processes"):
        pd.testing.assert_frame_equal(getattr(fast, table), getattr(generic, table))
    assert list(fast.strings.values) == list(generic.strings.values)


@pytest.mark.parametrize("path", ALL_PUBLIC, ids=lambda p: p.name)
def test_every_kernel_links_to_its_launch_call_on_pid_and_correlation(path):
    trace = read(path)
    launches = trace.api[["pid", "correlation"]].drop_duplicates()
    linked = trace.kernels.merge(launches, on=["pid", "correlation"], how="inner")
    runtime_ids = {
        e["args"]["correlation"] for e in plain_events(path, "cuda_runtime", "cuda_driver")
    }
    expected = sum(e["args"]["correlation"] in runtime_ids for e in plain_events(path, "kernel"))
    assert len(linked) == expected > 0


def test_a100_trace_has_its_provenance_facts():
    trace = read(A100)
    names = pd.Series(trace.names("kernels"))
    assert len(trace.kernels) == 2700
    assert names.str.contains("ncclKernel_AllReduce").sum() == 15
    assert names.str.contains("ncclKernel_Broadcast").sum() == 6
    assert trace.ranks == [0] and trace.meta["world_size"] == 2
    device = trace.devices.iloc[0]
    assert (device["device"], device["name"], device["sm_count"], device["compute_capability"]) == (
        0,
        "NVIDIA A100-PG509-200",
        108,
        "8.0",
    )
    assert device["memory_bytes"] == 42297524224


def test_b200_trace_has_its_provenance_facts():
    trace = read(B200)
    names = trace.names("kernels")
    durations = (trace.kernels["end"] - trace.kernels["start"]).to_numpy()
    multimem = np.char.find(names.astype(str), "multimem_all_reduce_kernel") >= 0
    assert len(trace.kernels) == 768
    assert multimem.any()
    assert durations[multimem].sum() / durations.sum() == pytest.approx(0.195, abs=0.001)
    gpu = trace.ranges[trace.ranges["kind"] == RANGE_KIND_GPU_ANNOTATION]
    assert len(gpu) == 3 and (gpu["device"] == 0).all() and (gpu["tid"] == -1).all()
    assert trace.devices["name"].tolist() == ["NVIDIA B200"] and trace.meta["world_size"] == 8


def test_mi300x_trace_has_its_provenance_facts():
    trace = read(MI300X)
    assert len(trace.kernels) == 555
    assert trace.devices["name"].tolist() == ["AMD Instinct MI300X"]
    assert trace.devices["device"].tolist() == trace.processes["device"].tolist() == [9]


def test_graph_kernels_carry_the_graph_launch_correlation():
    trace = read(MI300X)
    launch = trace.api[trace.names("api") == "hipGraphLaunch"]
    assert len(launch) == 1
    correlation = int(launch["correlation"].iloc[0])
    graph_kernels = trace.kernels[
        (trace.kernels["correlation"] == correlation)
        & (trace.kernels["pid"] == launch["pid"].iloc[0])
    ]
    expected = [
        e for e in plain_events(MI300X, "kernel") if e["args"]["correlation"] == correlation
    ]
    assert len(graph_kernels) == len(expected) > 500


def test_api_names_lose_their_abi_suffix():
    assert strip_abi_suffix("cudaLaunchKernel_v7000") == "cudaLaunchKernel"
    assert strip_abi_suffix("cudaMemcpyAsync_ptsz") == "cudaMemcpyAsync"
    assert strip_abi_suffix("cuMemcpyDtoH_v2") == "cuMemcpyDtoH"
    assert strip_abi_suffix("cudaMemcpy2DAsync") == "cudaMemcpy2DAsync"
    a100_names = set(read(A100).names("api"))
    mi300x_names = set(read(MI300X).names("api"))
    assert (
        "cudaStreamGetCaptureInfo" in a100_names and "cudaStreamGetCaptureInfo_v2" not in a100_names
    )
    assert (
        "hipGetDeviceProperties" in mi300x_names
        and "hipGetDevicePropertiesR0600" not in mi300x_names
    )


@pytest.mark.parametrize("path", ALL_PUBLIC, ids=lambda p: p.name)
def test_annotation_depth_counts_enclosing_annotations_on_the_same_thread(path):
    ranges = read(path).ranges
    host = ranges[ranges["kind"] == RANGE_KIND_ANNOTATION]
    assert len(host) == len(plain_events(path, "user_annotation"))
    s, e, t = host["start"].to_numpy(), host["end"].to_numpy(), host["tid"].to_numpy()
    order = np.lexsort((-(e - s), s))
    rank_in_order = np.empty(len(s), dtype=int)
    rank_in_order[order] = np.arange(len(s))
    brute = [  # O(n^2) oracle: earlier (by start, longest first) annotations still open at my start
        sum(
            1
            for j in range(len(s))
            if t[j] == t[i] and rank_in_order[j] < rank_in_order[i] and e[j] > s[i]
        )
        for i in range(len(s))
    ]
    assert host["depth"].tolist() == brute


def test_nesting_depth_of_back_to_back_and_instant_ranges():
    # thread 1: [0,10) holds [2,4) and [4,6) back to back, and an instant at 5 inside [4,6)
    start = np.array([0, 2, 4, 5, 20])
    end = np.array([10, 4, 6, 5, 30])
    groups = np.array([1, 1, 1, 1, 1])
    assert nesting_depth(groups, start, end).tolist() == [0, 1, 1, 2, 0]


def test_gpu_annotations_share_their_cpu_annotation_external_id():
    ranges = read(B200).ranges
    cpu = ranges[ranges["kind"] == RANGE_KIND_ANNOTATION]
    gpu = ranges[ranges["kind"] == RANGE_KIND_GPU_ANNOTATION]
    pairs = gpu.merge(cpu, on="external_id", suffixes=("_gpu", "_cpu"))
    assert len(pairs) == len(gpu) == 3
    assert (pairs["name_id_gpu"] == pairs["name_id_cpu"]).all()
    assert (pairs["pid_gpu"] == pairs["pid_cpu"]).all()


def test_sglang_decode_step_annotation_is_a_range():
    ranges = read(MI300X).ranges
    texts = read(MI300X).strings.lookup(ranges["name_id"].to_numpy())
    assert "step[DECODE bs=32]" in set(texts)


def test_processes_map_each_rank_to_its_device():
    trace = read(A100)
    assert trace.processes[["host_pid", "rank", "device"]].values.tolist() == [[2910249, 0, 0]]
    assert trace.processes["name"].tolist() == ["python3.10"]
    assert set(trace.kernels["pid"]) == {2910249}


def test_gpu_ops_belong_to_the_process_whose_call_launched_them(tmp_path):
    doc = json.loads(json.dumps(plain(A100)))
    worker_tid, worker_pid = (
        2919752,
        4242,
    )  # pretend the autograd thread's calls came from another process
    for e in doc["traceEvents"]:
        if e.get("cat") == "cuda_runtime" and e.get("tid") == worker_tid:
            e["pid"] = worker_pid
    moved = {
        e["args"]["correlation"]
        for e in doc["traceEvents"]
        if e.get("cat") == "cuda_runtime" and e["pid"] == worker_pid
    }
    trace = read_kineto([write_trace(tmp_path / "two_procs.json", doc)])
    from_worker = trace.kernels["correlation"].isin(moved).to_numpy()
    assert from_worker.any() and (~from_worker).any()
    assert set(trace.kernels.loc[from_worker, "pid"]) == {worker_pid}
    assert set(trace.kernels.loc[~from_worker, "pid"]) == {2910249}
    assert sorted(trace.processes["host_pid"]) == [worker_pid, 2910249]


def test_single_file_keeps_its_own_timestamps_and_records_the_epoch_base():
    trace = read(A100)
    first = min(ns(e["ts"]) for e in plain_events(A100, "kernel"))
    assert int(trace.kernels["start"].min()) == first
    assert trace.meta["base_time_ns"] == plain(A100)["baseTimeNanoseconds"]


def test_tables_are_sorted_by_start():
    trace = read(A100)
    for table in ("kernels", "copies", "api", "ranges"):
        assert getattr(trace, table)["start"].is_monotonic_increasing


# ---- several ranks -------------------------------------------------------------------------


def rank_copy(
    src: Path, dst: Path, *, rank: int | None, base_shift_ns: int = 0, device: int | None = None
) -> Path:
    """A real trace rewritten as another rank: its rank, base time and (optionally) GPU ordinal."""
    doc = orjson.loads(orjson.dumps(plain(src)))  # a deep copy, 2x faster than json's
    if rank is None:
        doc.pop("distributedInfo", None)
    else:
        doc["distributedInfo"]["rank"] = rank
    doc["baseTimeNanoseconds"] += base_shift_ns
    if device is not None:
        for e in doc["traceEvents"]:
            if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"):
                e["pid"] = device
                if "device" in e.get("args", {}):
                    e["args"]["device"] = device
    return write_trace(dst, doc)


def test_two_rank_directory_loads_as_one_trace_on_one_clock(tmp_path):
    rank_copy(B200, tmp_path / "run-TP-0.trace.json.gz", rank=0)
    rank_copy(B200, tmp_path / "run-TP-1.trace.json.gz", rank=1, base_shift_ns=1_000_000)
    trace = load_trace(tmp_path)
    trace.validate()
    assert trace.ranks == [0, 1] and trace.meta["files"] == 2
    by_rank = {
        r: trace.kernels[trace.kernels["pid"] == pid]
        for pid, r in zip(trace.processes["pid"], trace.processes["rank"])
    }
    assert len(by_rank[0]) == len(by_rank[1]) == 768
    # the same ts, one millisecond later on rank 1's clock
    assert np.array_equal(
        by_rank[1]["start"].to_numpy(), by_rank[0]["start"].to_numpy() + 1_000_000
    )
    assert trace.meta["base_time_ns"] == plain(B200)["baseTimeNanoseconds"]


def test_ranks_reusing_a_device_ordinal_get_distinct_devices(tmp_path):
    rank_copy(A100, tmp_path / "a-TP-0.trace.json.gz", rank=0)
    rank_copy(A100, tmp_path / "a-TP-1.trace.json.gz", rank=1)
    trace = read_kineto([tmp_path])
    assert trace.devices[["device", "rank", "ordinal"]].values.tolist() == [[0, 0, 0], [1, 1, 0]]
    assert trace.processes[["rank", "device"]].values.tolist() == [[0, 0], [1, 1]]
    assert trace.devices["name"].tolist() == ["NVIDIA A100-PG509-200"] * 2
    for pid, device in zip(trace.processes["pid"], trace.processes["device"]):
        assert set(trace.kernels.loc[trace.kernels["pid"] == pid, "device"]) == {device}
        assert set(trace.copies.loc[trace.copies["pid"] == pid, "device"]) == {device}


def test_ranks_on_distinct_ordinals_keep_their_numbers(tmp_path):
    rank_copy(B200, tmp_path / "x-TP-0.trace.json.gz", rank=0)
    rank_copy(B200, tmp_path / "x-TP-1.trace.json.gz", rank=1, device=1)
    trace = read_kineto([tmp_path])
    assert trace.devices[["device", "ordinal", "rank"]].values.tolist() == [[0, 0, 0], [1, 1, 1]]
    assert trace.processes["device"].tolist() == [0, 1]


def test_pid_and_tid_keys_are_unique_per_file(tmp_path):
    rank_copy(A100, tmp_path / "r-TP-0.trace.json.gz", rank=0)
    rank_copy(A100, tmp_path / "r-TP-1.trace.json.gz", rank=1)
    trace = read_kineto([tmp_path])
    assert trace.processes["host_pid"].nunique() == 1 and trace.processes["pid"].nunique() == 2
    threads = trace.api.groupby("pid")["tid"].unique()
    assert not set(threads.iloc[0]) & set(threads.iloc[1])
    # (pid, correlation) stays a unique join key although both files reuse the same ids
    launches = trace.api[["pid", "correlation"]]
    assert not launches[trace.api["correlation"] >= 0].duplicated().any()


def test_rank_falls_back_to_the_sglang_file_name(tmp_path):
    rank_copy(MI300X, tmp_path / "1721480000.123-TP-0-DECODE.trace.json.gz", rank=None)
    rank_copy(MI300X, tmp_path / "1721480000.123-TP-3-DECODE.trace.json.gz", rank=None)
    trace = load_trace(str(tmp_path / "*-TP-*.trace.json.gz"))
    assert trace.ranks == [0, 3]
    assert trace.meta["world_size"] == -1


def test_stage_files_of_one_rank_share_its_device(tmp_path):
    rank_copy(B200, tmp_path / "p-TP-0-EXTEND.trace.json.gz", rank=0)
    rank_copy(B200, tmp_path / "p-TP-0-DECODE.trace.json.gz", rank=0, base_shift_ns=10**9)
    trace = read_kineto([tmp_path])
    assert trace.devices["device"].tolist() == [0]
    assert len(trace.kernels) == 2 * 768


def test_sglang_merged_file_is_skipped_beside_its_rank_files(tmp_path):
    rank_copy(B200, tmp_path / "m-TP-0.trace.json.gz", rank=0)
    shutil.copy(B200, tmp_path / "merged-m.trace.json.gz")
    trace = read_kineto([tmp_path])
    assert len(trace.kernels) == 768 and trace.meta["files"] == 1
    assert any("merged-m.trace.json.gz" in w for w in trace.warnings)


def test_json_array_format_loads(tmp_path):
    path = write_trace(tmp_path / "array.json", plain(MI300X)["traceEvents"])
    trace = read_kineto([path])
    assert len(trace.kernels) == 555 and trace.meta["base_time_ns"] == 0


def test_unexpected_value_types_fall_back_to_the_generic_parse(tmp_path):
    doc = json.loads(json.dumps(plain(MI300X)))
    for e in doc["traceEvents"]:
        if e.get("cat") == "python_function":
            e["args"] = ["not", "an", "object"]  # the typed decoder rejects this shape
            break
    trace = read_kineto([write_trace(tmp_path / "odd.json", doc)])
    assert len(trace.kernels) == 555
    assert int((trace.kernels["end"] - trace.kernels["start"]).sum()) == int(
        (read(MI300X).kernels["end"] - read(MI300X).kernels["start"]).sum()
    )


# ---- the benchmark's input -----------------------------------------------------------------


def test_benchmark_generator_tiles_the_real_trace_with_fresh_ids(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "gen_kineto_trace", Path(__file__).resolve().parents[1] / "bench/gen_kineto_trace.py"
    )
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    info = gen.generate(B200, tmp_path / "tiled.json.gz", target_mb=30, use_gzip=True)
    copies = info["copies"]
    trace = read_kineto([tmp_path / "tiled.json.gz"])
    trace.validate()
    assert copies >= 2 and len(trace.kernels) == copies * 768
    assert trace.meta["python_function_events"] == copies * 15230
    launches = trace.api[trace.api["correlation"] >= 0]
    assert not launches.duplicated(["pid", "correlation"]).any()
    linked = trace.kernels.merge(launches[["pid", "correlation"]], on=["pid", "correlation"])
    assert len(linked) == len(trace.kernels)
    one = read(B200).kernels
    period = int(trace.kernels["start"].iloc[768] - one["start"].iloc[0])
    assert period > int(one["end"].max() - one["start"].min())  # copies follow each other
