"""The allreduce cost model against the allreduces a trace measured.

For every allreduce kernel whose message size the trace records: the measured time and what the
model of :mod:`verifyprof.model.inputs.allreduce` predicts for that size, on the trace's GPU and
link (``data/hardware``). What "measured" means depends on the trace, and the rows say which:

* ``transfer``: several ranks in the trace, the call matched across them: own end minus the
  latest rank's start (:mod:`verifyprof.attribution.collective_waits`). This is what the model
  predicts.
* ``kernel``: one rank only: the whole kernel time, which also holds the wait for the other ranks
  to join. An upper bound of the transfer; in a training step or a skewed server it can be many
  times the transfer, so a model that undershoots it is not necessarily wrong.

Predictions per row: ``nccl_us`` (NCCL tuning model, or the hardware file's measured NCCL table),
``custom_us`` (one-/two-shot custom allreduce model), ``alpha_beta_us`` (textbook ring:
2(n-1) x NCCL's LL per-hop latency + 2(n-1)/n x S / link bandwidth). ``model_us`` is the one that
matches the kernel: NCCL kernels -> ``nccl_us``; symmetric-memory and custom kernels ->
``custom_us``.

Sizes come from the trace (``bytes_from = "trace"``). Where it records none (CUDA-graph replays,
nsys exports without NCCL's payloads) and the caller gives the model's hidden size, an allreduce
inside a target-model step (``verifyprof.verify`` / ``.decode`` with ``tokens=`` and ``bs=``
attributes) is taken to move ``bs x tokens x hidden x dtype bytes``, the Megatron tensor-parallel
activation (``bytes_from = "inferred"``).

A model-level micro-benchmark: it calls the allreduce model and the attribution's collectives
itself, below any run (``pipeline.open_run``), because no run answers per-kernel sizes.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from verifyprof.attribution.assignment import AttributedSteps, attributed_steps
from verifyprof.attribution.collective_waits import collective_calls, collective_kernels
from verifyprof.attribution.steps import NO_STEP, gpu_ops
from verifyprof.attribution.taxonomy import Taxonomy, load_taxonomy
from verifyprof.contracts.errors import NoStepsError, VerifyprofError
from verifyprof.model.inputs.allreduce import NCCL_HW_LAT_US, ring_alpha_beta_us
from verifyprof.model.inputs.hardware import Hardware
from verifyprof.pipeline.data_files import load_hardware
from verifyprof.trace.events import Trace

# message-size buckets (bytes): verify-sized messages are tens of KiB, prefill and training MiBs
BUCKET_EDGES = (0, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, np.inf)
_NCCL = re.compile(r"nccl", re.IGNORECASE)
_SYMM = re.compile(r"multimem|symm", re.IGNORECASE)
TARGET_STEPS = ("verifyprof.verify", "verifyprof.decode", "verifyprof.prefill")


def hardware_for_device(name: str) -> Hardware | None:
    """The hardware file for a device name as traces spell it ("NVIDIA A100-PG509-200",
    "NVIDIA H100 80GB HBM3"): the whole name, then shorter dash-separated prefixes."""
    key = name.strip().lower().replace(" ", "-")
    key = key.removeprefix("nvidia-")
    parts = key.split("-")
    for cut in range(len(parts), 0, -1):
        try:
            return load_hardware("-".join(parts[:cut]))
        except VerifyprofError:
            continue
    return None


def allreduce_samples(
    trace: Trace,
    hardware: Hardware | None = None,
    taxonomy: Taxonomy | None = None,
    hidden: int | None = None,
    dtype_bytes: int = 2,
) -> pd.DataFrame:
    """One row per allreduce kernel (per rank) with a known size: measured and predicted times.

    ``hardware`` defaults to the file matching the trace's device name; without one the
    predictions are NaN and ``hardware`` says why. ``hidden``: infer unrecorded sizes (module doc).
    """
    regex = "|".join(re.escape(n) + r"\b" for n in TARGET_STEPS)
    attributed = attributed_steps(trace, taxonomy or load_taxonomy(), regex)
    ops = attributed.ops
    every = collective_kernels(trace, ops)
    if every is None:
        return _empty()
    every["kernel_ns"] = every["end"].to_numpy() - every["start"].to_numpy()
    every["bytes_from"] = np.where(every["bytes"].to_numpy() > 0, "trace", "")
    if hidden:
        _infer_bytes(attributed, every, hidden, dtype_bytes)
    kernels = every[(every["family"].to_numpy() == "allreduce") & (every["bytes"].to_numpy() > 0)]
    if kernels.empty:
        return _empty()
    calls = collective_calls(trace, ops, every)
    samples = kernels[["op", "device", "bytes", "bytes_from", "group_size", "kernel_ns"]].copy()
    samples["basis"] = "kernel"
    samples["measured_ns"] = samples["kernel_ns"]
    if calls is not None:
        transfer = calls.set_index("op")["transfer_ns"]
        matched = transfer.reindex(samples["op"]).to_numpy()
        found = ~np.isnan(matched.astype(float))
        samples.loc[found, "measured_ns"] = matched[found].astype(np.int64)
        samples.loc[found, "basis"] = "transfer"
    names = pd.Series(
        trace.strings.lookup(ops.name_id[samples["op"].to_numpy()]), index=samples.index
    )
    impl = {
        n: "nccl" if _NCCL.search(n) else "symm_mem" if _SYMM.search(n) else "custom"
        for n in pd.unique(names)
    }
    samples["impl"] = names.map(impl)
    samples["kernel"] = names
    device_names = dict(zip(trace.devices["device"].tolist(), trace.devices["name"].tolist()))
    samples["gpu"] = samples["device"].map(lambda d: device_names.get(int(d), "")).astype(object)
    _predict(samples, hardware)
    samples.insert(0, "trace", ", ".join(str(p) for p in trace.source))
    return samples.drop(columns=["op"]).reset_index(drop=True)


def collective_counts(trace: Trace, taxonomy: Taxonomy | None = None) -> dict[str, int]:
    """Collective kernels per family (all devices)."""
    kernels = collective_kernels(trace, gpu_ops(trace, taxonomy or load_taxonomy()))
    return (
        {}
        if kernels is None
        else {str(k): int(v) for k, v in kernels["family"].value_counts().sort_index().items()}
    )


def unsized_allreduces(trace: Trace, taxonomy: Taxonomy | None = None) -> int:
    """Allreduce kernels whose size the trace does not record."""
    kernels = collective_kernels(trace, gpu_ops(trace, taxonomy or load_taxonomy()))
    if kernels is None:
        return 0
    return int(
        ((kernels["family"].to_numpy() == "allreduce") & (kernels["bytes"].to_numpy() <= 0)).sum()
    )


def _infer_bytes(
    attributed: AttributedSteps, kernels: pd.DataFrame, hidden: int, dtype_bytes: int
) -> None:
    """bs x tokens x hidden x dtype bytes for unsized allreduces inside target-model steps."""
    unsized = (kernels["bytes"].to_numpy() <= 0) & (kernels["family"].to_numpy() == "allreduce")
    if not unsized.any():
        return
    try:
        assigned = attributed.assigned
    except NoStepsError:
        return
    steps = assigned.steps
    op = kernels["op"].to_numpy()
    size = np.full(len(op), -1, dtype=np.int64)
    for op_step, _ in assigned.levels:  # innermost level wins
        step = op_step[op]
        inside = step != NO_STEP
        attrs = steps["attrs"].to_numpy()[step[inside]]
        tokens = np.array(
            [int(a.get("tokens", 0)) if str(a.get("tokens", "")).isdigit() else 0 for a in attrs],
            dtype=np.int64,
        )  # per kernel in a step: a handful per layer
        batch = np.array(
            [int(a.get("bs", 1)) if str(a.get("bs", "1")).isdigit() else 1 for a in attrs],
            dtype=np.int64,
        )
        found = tokens > 0
        where = np.flatnonzero(inside)[found]
        size[where] = batch[found] * tokens[found] * hidden * dtype_bytes
    fill = unsized & (size > 0)
    kernels.loc[fill, "bytes"] = size[fill]
    kernels.loc[fill, "bytes_from"] = "inferred"


def _predict(samples: pd.DataFrame, forced: Hardware | None) -> None:
    for col in ("nccl_us", "custom_us", "alpha_beta_us"):
        samples[col] = np.nan
    samples["hardware"] = ""
    for gpu in pd.unique(samples["gpu"]):  # one or two device names per trace
        mine = (samples["gpu"] == gpu).to_numpy()
        hw = forced or (hardware_for_device(gpu) if gpu else None)
        if hw is None:
            samples.loc[mine, "hardware"] = (
                f"no hardware file for {gpu or 'an unnamed device'} (give --gpu)"
            )
            continue
        samples.loc[mine, "hardware"] = f"{hw.name} / {hw.link.name}"
        hop_us = NCCL_HW_LAT_US["ring"][hw.link.kind]["LL"]
        pairs = samples.loc[mine, ["bytes", "group_size"]].astype(np.int64)
        sizes = pairs.drop_duplicates()
        rows = []
        for nbytes, n in zip(
            sizes["bytes"].tolist(), sizes["group_size"].tolist()
        ):  # once per (size, ranks): TP repeats a few sizes
            rows.append(
                (
                    hw.allreduce_us(nbytes, n, "nccl").us,
                    hw.allreduce_us(nbytes, n, "custom").us,
                    ring_alpha_beta_us(nbytes, n, hop_us, hw.link.bw_gbps),
                )
                if n >= 2
                else (np.nan, np.nan, np.nan)
            )
        table = sizes.assign(
            **{
                c: [r[i] for r in rows]
                for i, c in enumerate(("nccl_us", "custom_us", "alpha_beta_us"))
            }
        )
        values = pairs.merge(table, on=["bytes", "group_size"], how="left")
        for col in ("nccl_us", "custom_us", "alpha_beta_us"):
            samples.loc[mine, col] = values[col].to_numpy()
    samples["model_us"] = np.where(
        samples["impl"].to_numpy() == "nccl", samples["nccl_us"], samples["custom_us"]
    )
    samples["measured_us"] = samples["measured_ns"] / 1e3
    samples["error"] = samples["model_us"] / samples["measured_us"] - 1.0


def by_bucket(samples: pd.DataFrame) -> pd.DataFrame:
    """Per trace, kernel implementation, basis and message-size bucket: medians and the error."""
    if samples.empty:
        return pd.DataFrame()
    edges = np.asarray(BUCKET_EDGES, dtype=float)
    bucket = np.searchsorted(edges, samples["bytes"].to_numpy(dtype=float), side="right") - 1
    frame = samples.assign(bucket=bucket)
    rows = []
    for (trace, impl, basis, source, b), group in frame.groupby(
        ["trace", "impl", "basis", "bytes_from", "bucket"], sort=True
    ):
        measured = group["measured_us"].to_numpy()
        rows.append(
            {
                "trace": trace,
                "impl": impl,
                "basis": basis,
                "bytes_from": source,
                "bucket": _bucket_label(edges[b], edges[b + 1]),
                "samples": len(group),
                "ranks": int(np.median(group["group_size"])),
                "bytes_p50": int(np.median(group["bytes"])),
                "measured_us_p50": float(np.median(measured)),
                "measured_us_min": float(measured.min()),
                "model_us_p50": float(np.median(group["model_us"])),
                "nccl_us_p50": float(np.median(group["nccl_us"])),
                "custom_us_p50": float(np.median(group["custom_us"])),
                "alpha_beta_us_p50": float(np.median(group["alpha_beta_us"])),
                "error_p50": float(np.median(group["error"])),
                "error_vs_min": (
                    float(np.median(group["model_us"]) / measured.min() - 1.0)
                    if measured.min() > 0
                    else np.nan
                ),
                "hardware": str(group["hardware"].iloc[0]),
            }
        )
    return pd.DataFrame(rows)


def _bucket_label(lo: float, hi: float) -> str:
    def size(x: float) -> str:
        for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
            if x >= scale:
                return f"{x / scale:g} {unit}"
        return f"{x:g} B"

    return f">= {size(lo)}" if np.isinf(hi) else f"{size(lo)} - {size(hi)}"


def _empty() -> pd.DataFrame:
    return pd.DataFrame(
        columns=[
            "trace",
            "device",
            "bytes",
            "bytes_from",
            "group_size",
            "kernel_ns",
            "basis",
            "measured_ns",
            "impl",
            "kernel",
            "gpu",
            "nccl_us",
            "custom_us",
            "alpha_beta_us",
            "hardware",
            "model_us",
            "measured_us",
            "error",
        ]
    )
