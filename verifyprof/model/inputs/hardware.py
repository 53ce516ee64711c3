"""Hardware specs (``data/hardware/*.toml``): GPU roofline, links, launch costs, measured allreduce
tables; built from the files' tables, which the pipeline reads (:mod:`verifyprof.pipeline.
data_files`: the model opens no file)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifyprof.contracts.datafiles import require
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.model.inputs.allreduce import (
    MeasuredTable,
    nccl_allreduce_us,
    oneshot_us,
    twoshot_us,
)

LINKS_FILE = "links"


@dataclass(frozen=True)
class Link:
    key: str
    name: str
    kind: str  # pcie | nvlink | net
    bw_gbps: float
    nccl_busbw_gbps: float
    barrier_us: float
    peer_read_gbps: float
    source: str = ""


@dataclass(frozen=True)
class LaunchCosts:
    kernel_launch_us: float = 5.0
    graph_launch_us: float = 8.0
    graph_node_us: float = 1.0
    compiled_call_us: float = 0.0  # host time torch.compile's cudagraph trees add per call


@dataclass(frozen=True)
class AllreduceEstimate:
    us: float
    method: str  # what produced the number, for the assumptions list


@dataclass(frozen=True)
class Hardware:
    name: str
    path: Path
    bandwidth_tbps: float
    bf16_tflops: float
    fp8_tflops: float | None
    fp4_tflops: float | None
    compute_capability: str
    link: Link
    gpus_per_node: int
    launch: LaunchCosts
    allreduce_fusion: bool
    custom_allreduce: bool
    tables: tuple[MeasuredTable, ...] = field(default_factory=tuple)
    source: str = ""
    memory_gb: float | None = None  # per GPU; None: the file does not say (no fit check)

    def peak_tflops(self, dtype: str) -> float:
        """Dense tensor throughput for a weight dtype (int4 runs as fp8/bf16 math: no int4 peak)."""
        if dtype == "fp4" and self.fp4_tflops:
            return self.fp4_tflops
        if dtype in ("fp8", "fp4", "int4") and self.fp8_tflops:
            return self.fp8_tflops
        return self.bf16_tflops

    def table(self, impl: str, gpus: int) -> MeasuredTable | None:
        for table in self.tables:
            if table.impl == impl and table.gpus == gpus:
                return table
        return None

    def allreduce_us(self, nbytes: float, gpus: int, impl: str = "nccl") -> AllreduceEstimate:
        """One allreduce of ``nbytes`` on ``gpus`` ranks: a measured table if one fits, else the
        model."""
        if gpus <= 1:
            return AllreduceEstimate(0.0, "single GPU: no allreduce")
        table = self.table(impl, gpus)
        if table is not None:
            where = "interpolated" if table.covers(nbytes) else "extrapolated"
            return AllreduceEstimate(
                table.at(nbytes), f"measured {impl} table x{gpus} ({where}; {table.source})"
            )
        if impl == "nccl":
            choice = nccl_allreduce_us(nbytes, gpus, self.link.kind, self.link.nccl_busbw_gbps)
            return AllreduceEstimate(
                choice.us,
                f"NCCL tuning model, {choice.algo}/{choice.proto} over {self.link.name} (tuning.cc"
                " constants)",
            )
        one = oneshot_us(nbytes, gpus, self.link.barrier_us, self.link.peer_read_gbps)
        one_note = (
            f"one-shot model: 2 x {self.link.barrier_us:g} us barrier + (n-1) x bytes /"
            f" {self.link.peer_read_gbps:g} GB/s over {self.link.name}"
        )
        if self.link.kind != "nvlink" or _prefers_oneshot(nbytes, gpus):
            return AllreduceEstimate(
                one,
                one_note + ("" if self.link.kind == "nvlink" else " (PCIe patches are one-shot)"),
            )
        two = twoshot_us(nbytes, gpus, self.link.barrier_us, self.link.bw_gbps)
        return AllreduceEstimate(
            two,
            f"two-shot model (vLLM/SGLang pick it at this size): 3 x {self.link.barrier_us:g} us"
            f" barrier + 2(n-1)/n x bytes / {self.link.bw_gbps:g} GB/s over {self.link.name}",
        )


def _prefers_oneshot(nbytes: float, gpus: int) -> bool:
    """vLLM/SGLang custom-AR selection over full NVLink (REFERENCE 6.7)."""
    return gpus == 2 or (gpus <= 4 and nbytes < 512 * 1024) or (gpus <= 8 and nbytes < 256 * 1024)


def links_of(files: list[tuple[dict[str, Any], Path]]) -> dict[str, Link]:
    """The links of ``links.toml`` files (their tables and paths), a later file's entries
    overriding an earlier's (the built-in file first, then the user's)."""
    links: dict[str, Link] = {}
    for data, path in files:
        for key, entry in data.items():
            if not isinstance(entry, dict):
                raise VerifyprofError(f"link {key!r} must be a table", path)
            kind = require(entry, "kind", path, str)
            if kind not in ("pcie", "nvlink", "net"):
                raise VerifyprofError(
                    f"link {key!r}: kind must be pcie, nvlink or net, got {kind!r}", path
                )
            links[key] = Link(
                key=key,
                name=str(entry.get("name", key)),
                kind=kind,
                bw_gbps=float(require(entry, "bw_gbps", path)),
                nccl_busbw_gbps=float(require(entry, "nccl_busbw_gbps", path)),
                barrier_us=float(require(entry, "barrier_us", path)),
                peer_read_gbps=float(require(entry, "peer_read_gbps", path)),
                source=str(entry.get("source", "")),
            )
    return links


def link_named(links: dict[str, Link], name: str) -> Link:
    key = name.lower().replace("-", "_").replace(" ", "_")
    if key not in links:
        raise VerifyprofError(f"unknown link {name!r}: known are {', '.join(sorted(links))}")
    return links[key]


def hardware_of(
    data: dict[str, Any], path: Path, links: dict[str, Link], link_override: str | None = None
) -> Hardware:
    """A hardware file's tables (read from ``path``) as a :class:`Hardware`; ``link_override``
    replaces the file's link (and drops the file's measured allreduce tables, which were
    measured over its own link)."""
    name = require(data, "name", path, str)
    gpu = require(data, "gpu", path, dict)
    link_info = data.get("link", {})
    link_name = link_override or link_info.get("name")
    if not link_name:
        raise VerifyprofError("missing field 'link.name' (or give --link)", path)
    tables = []
    own = str(link_info.get("name") or "")
    if link_override and own and link_named(links, link_override).key != link_named(links, own).key:
        entries = []  # measured over the file's own link: they say nothing of another one
    else:
        entries = data.get("allreduce", [])
    for i, entry in enumerate(entries):
        try:
            tables.append(
                MeasuredTable(
                    impl=str(require(entry, "impl", path, str)),
                    gpus=int(require(entry, "gpus", path, int)),
                    sizes=tuple(int(s) for s in require(entry, "sizes", path, list)),
                    us=tuple(float(u) for u in require(entry, "us", path, list)),
                    source=str(entry.get("source", "")),
                )
            )
        except (TypeError, ValueError):
            raise VerifyprofError(
                f"allreduce table {i}: sizes and us must be numbers", path
            ) from None
        except VerifyprofError as exc:
            raise VerifyprofError(exc.problem, path) from None
    launch = data.get("launch", {})
    features = data.get("features", {})
    optional = lambda key: float(gpu[key]) if key in gpu else None
    bandwidth = float(require(gpu, "bandwidth_tbps", path))
    bf16 = float(require(gpu, "bf16_tflops", path))
    if bandwidth <= 0 or bf16 <= 0:
        raise VerifyprofError("gpu.bandwidth_tbps and gpu.bf16_tflops must be positive", path)
    return Hardware(
        name=name,
        path=path,
        bandwidth_tbps=bandwidth,
        bf16_tflops=bf16,
        fp8_tflops=optional("fp8_tflops"),
        fp4_tflops=optional("fp4_tflops"),
        compute_capability=str(gpu.get("compute_capability", "")),
        link=link_named(links, link_name),
        gpus_per_node=int(link_info.get("gpus_per_node", 8)),
        launch=LaunchCosts(
            kernel_launch_us=float(launch.get("kernel_launch_us", LaunchCosts.kernel_launch_us)),
            graph_launch_us=float(launch.get("graph_launch_us", LaunchCosts.graph_launch_us)),
            graph_node_us=float(launch.get("graph_node_us", LaunchCosts.graph_node_us)),
            compiled_call_us=float(launch.get("compiled_call_us", LaunchCosts.compiled_call_us)),
        ),
        allreduce_fusion=bool(features.get("allreduce_fusion", False)),
        custom_allreduce=bool(features.get("custom_allreduce", False)),
        tables=tuple(tables),
        source=str(data.get("source", "")),
        memory_gb=_memory_gb(gpu),
    )


def _memory_gb(gpu: dict[str, Any]) -> float | None:
    """``gpu.memory_gb``, None where it is missing or not a number (the fit check is then left
    out, as before)."""
    try:
        return float(gpu["memory_gb"])
    except (KeyError, TypeError, ValueError):
        return None
