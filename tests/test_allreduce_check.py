"""The allreduce model checked against the allreduces real traces measured
(bench/allreduce_check.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import PUBLIC, REPO
from tracebuilder import late_joiner_allreduce

from verifyprof.pipeline.data_files import load_hardware
from verifyprof.trace import load_trace

sys.path.insert(0, str(REPO / "bench"))
from allreduce_check import (  # noqa: E402 - bench's, which only bench and this test use
    allreduce_samples,
    by_bucket,
    hardware_for_device,
)

A100 = PUBLIC / "kineto" / "hta_nccl_data_a100_rank0of2.json.gz"
B200 = PUBLIC / "kineto" / "tracelens_b200_vllm_moe_eager_trace.json.gz"
MFU_2GPU = PUBLIC / "nsys" / "nsysai_mfu_2gpu_before_nsys2026.2.sqlite.gz"


@pytest.mark.parametrize(
    "device,hardware",
    [
        ("NVIDIA A100-PG509-200", "A100 SXM4"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
    ],
)
def test_trace_device_names_find_their_hardware_file(device, hardware):
    assert hardware_for_device(device).name == hardware


def test_unknown_device_has_no_hardware_file():
    assert hardware_for_device("Radeon Instinct MI300X") is None


def test_single_rank_nccl_allreduces_are_measured_by_kernel_time_against_the_nccl_model():
    samples = allreduce_samples(load_trace(A100))
    assert len(samples) == 15
    assert set(samples["impl"]) == {"nccl"} and set(samples["basis"]) == {"kernel"}
    assert (samples["measured_ns"] == samples["kernel_ns"]).all()
    a100 = load_hardware("a100")
    expected = [a100.allreduce_us(b, 2, "nccl").us for b in samples["bytes"]]
    assert np.allclose(samples["model_us"], expected)
    assert samples["hardware"].iloc[0].startswith("A100 SXM4 / NVLink3")


def test_symmetric_memory_allreduces_are_checked_against_the_custom_allreduce_model():
    samples = allreduce_samples(load_trace(B200))
    assert len(samples) == 73 and set(samples["impl"]) == {"symm_mem"}
    b200 = load_hardware("b200")
    assert np.allclose(
        samples["model_us"], [b200.allreduce_us(b, 8, "custom").us for b in samples["bytes"]]
    )
    assert np.allclose(
        samples["nccl_us"], [b200.allreduce_us(b, 8, "nccl").us for b in samples["bytes"]]
    )
    buckets = by_bucket(samples)
    assert buckets[["bucket", "samples", "ranks", "basis"]].values.tolist() == [
        ["4 MiB - 16 MiB", 73, 8, "kernel"]
    ]
    row = buckets.iloc[0]
    assert row["error_p50"] == pytest.approx(np.median(samples["error"]))


def test_traces_without_allreduce_sizes_give_no_samples():
    assert allreduce_samples(load_trace(MFU_2GPU)).empty


def two_rank_verify_trace():
    b = late_joiner_allreduce("verifyprof.verify bs=2 tokens=4 graph=1")
    return b.build()


def test_hidden_size_infers_unrecorded_allreduce_sizes_inside_verify_steps():
    trace = two_rank_verify_trace()
    assert allreduce_samples(trace, hardware=load_hardware("h200")).empty
    samples = allreduce_samples(trace, hardware=load_hardware("h200"), hidden=2048)
    assert samples["bytes"].tolist() == [2 * 4 * 2048 * 2] * 2
    assert set(samples["bytes_from"]) == {"inferred"} and set(samples["basis"]) == {"transfer"}
    assert samples["measured_ns"].tolist() == [100, 100]  # after rank 1 joined at 400
    assert np.allclose(samples["model_us"], load_hardware("h200").allreduce_us(32768, 2, "nccl").us)


def test_benchmark_prints_buckets_and_writes_json(tmp_path):
    out = tmp_path / "ar.json"
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "bench_allreduce_model.py"),
            str(B200),
            str(MFU_2GPU),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "symm_mem  kernel" in done.stdout and "upper bound" in done.stdout
    assert "include-blobs=true" in done.stdout
    report = json.loads(out.read_text())
    assert [t["sized"] for t in report["traces"]] == [73, 0]
    assert report["buckets"][0]["samples"] == 73 and report["buckets"][0]["basis"] == "kernel"
