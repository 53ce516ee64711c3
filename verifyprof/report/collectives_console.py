"""The collectives table under ``breakdown``: per kind, calls, sizes, wait for the slowest rank
and bus bandwidth, from the breakdown summary."""

from __future__ import annotations

from typing import Any

from verifyprof.report.layout import Col, Console, fitted_table


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f}"


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _gbps(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def print_collectives(console: Console, summary: dict[str, Any]) -> None:
    collectives = summary.get("collectives")
    if collectives:
        columns = [
            Col("collective", "text"),
            Col("calls"),
            Col("devs"),
            Col("transfer\np50 ms"),
            Col("wait\np50 ms"),
            Col("spread\np50 ms"),
            Col("spread\np90 ms"),
            Col("bytes\np50"),
            Col("busbw p50\nGB/s"),
        ]
        rows = [
            [
                family,
                str(s["calls"]),
                str(s["devices"]),
                _ms(s["transfer_ns_p50"]),
                _ms(s["wait_ns_p50"]),
                _ms(s["spread_ns_p50"]),
                _ms(s["spread_ns_p90"]),
                _bytes(s.get("bytes_p50")),
                _gbps(s.get("busbw_gbps_p50")),
            ]
            for family, s in collectives.items()
        ]
        console.print(
            fitted_table(console, columns, rows, title="\nCollectives across ranks (per call)")
        )
        console.print(
            "  busbw: nccl-tests' bus bandwidth over the transfer time (after the last rank"
            " joined); bytes: the call's size S as nccl-tests counts it",
            highlight=False,
        )
    kernels = summary.get("collective_kernels")
    if kernels and not collectives:
        columns = [
            Col("collective", "text"),
            Col("kernels"),
            Col("devs"),
            Col("kernel\np50 ms"),
            Col("kernel\np90 ms"),
            Col("sized"),
            Col("bytes\np50"),
            Col("ranks"),
            Col("busbw\n>= GB/s"),
        ]
        rows = [
            [
                family,
                str(s["kernels"]),
                str(s["devices"]),
                _ms(s["kernel_ns_p50"]),
                _ms(s["kernel_ns_p90"]),
                str(s["sized_calls"]),
                _bytes(s.get("bytes_p50")),
                str(s.get("group_size") or "-"),
                _gbps(s.get("kernel_busbw_gbps_p50")),
            ]
            for family, s in kernels.items()
        ]
        console.print(
            fitted_table(
                console,
                columns,
                rows,
                title="\nCollective kernels (one rank: not matched across ranks)",
            )
        )
        console.print(
            "  kernel time includes waiting for the other ranks, so busbw from it is a lower bound"
            " on the link's bus bandwidth",
            highlight=False,
        )
