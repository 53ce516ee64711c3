"""Console output at 80 and 120 columns: names shorten, numbers never, no line wraps.

Rendered with rich's ``Console(width=..., record=True)`` on real traces (the public B200 vLLM
MoE step, SGLang on MI300X, the project's own H200 trace), and once through the installed
console script in a pipe, where the width is rich's default of 80.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from verifyprof import pipeline
from verifyprof.attribution.kernel_names import short_kernel_name as short_name
from verifyprof.report import console as show
from verifyprof.report import whatif_console as show_whatif
from verifyprof.report.layout import fit, fit_label

REPO = Path(__file__).resolve().parents[1]
B200 = REPO / "tests/data/public/kineto/tracelens_b200_vllm_moe_eager_trace.json.gz"
MI300X = REPO / "tests/data/public/kineto/tracelens_mi300x_sglang_qwen3-8b_decode.json.gz"
DENSE = REPO / "traces/workload-dense-eager/trace.sqlite.gz"
WIDTHS = (80, 120)


def render(width: int, draw) -> str:  # type: ignore[no-untyped-def]
    console = Console(width=width, record=True, file=open(os.devnull, "w"))
    draw(console)
    return console.export_text()


def kernel_data(path: Path, top: int = 30) -> dict:
    table = pipeline.kernels(path, scope="whole-trace")  # ``kernels --whole-trace``
    return {"schema": "verifyprof.kernels/1", "unit": "ns", **table.to_json(top)}


def row_of(text: str, needle: str, last: bool = False) -> str:
    lines = [line for line in text.splitlines() if needle in line]
    return lines[-1] if last else lines[0]


def widest(text: str) -> int:
    """The longest line but the step-regex line, printed unbroken so that it can be copied."""
    return max(
        len(line)
        for line in text.splitlines()
        if not line.startswith("steps: ranges whose text matches")
    )


@pytest.fixture(scope="module")
def b200_kernels() -> dict:
    return kernel_data(B200)


@pytest.fixture(scope="module")
def mi300x_kernels() -> dict:
    return kernel_data(MI300X, top=40)


@pytest.mark.parametrize("width", WIDTHS)
def test_kernels_table_shows_every_number_at_width(b200_kernels, width):
    text = render(width, lambda c: show.print_kernels(b200_kernels, c))
    assert max(len(line) for line in text.splitlines()) <= width
    for i, row in enumerate(b200_kernels["kernels"], start=1):
        line = next(
            line
            for line in text.splitlines()
            if line.startswith(f"{i} ".rjust(3)) or line.startswith(f"{i} ")
        )
        for number in (
            f"{100 * row['share']:.1f}",
            f"{row['total_ns'] / 1e6:.3f}",
            str(row["count"]),
            f"{row['median_ns'] / 1e3:.1f}",
        ) + ((f"{row['min_ns'] / 1e3:.1f}-{row['max_ns'] / 1e3:.1f}",) if width >= 100 else ()):
            assert f" {number} " in f" {line} ", (number, line)


@pytest.mark.parametrize("width", WIDTHS)
def test_symmetric_memory_allreduce_kernel_name_is_not_blank(b200_kernels, width):
    text = render(width, lambda c: show.print_kernels(b200_kernels, c))
    line = row_of(text, "multimem_all_reduce_kernel")
    assert (
        "allreduce" in line and "19.5" in line
    )  # the #2 kernel of the B200 step, 19.5% of kernel time


@pytest.mark.parametrize("width", WIDTHS)
def test_sglang_resolve_future_token_ids_kernel_name_is_not_blank(mi300x_kernels, width):
    text = render(width, lambda c: show.print_kernels(mi300x_kernels, c))
    assert "resolve_future_token_ids_kernel" in text
    assert max(len(line) for line in text.splitlines()) <= width


def test_short_name_keeps_the_function_name_of_anonymous_namespace_kernels():
    assert (
        short_name(
            "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16,"
            " 16>(c10::BFloat16*, unsigned long)"
        )
        == "multimem_all_reduce_kernel<c10::BFloat16, 16>"
    )
    assert (
        short_name(
            "void (anonymous namespace)::resolve_future_token_ids_kernel<long>(long*, long const*,"
            " unsigned long)"
        )
        == "resolve_future_token_ids_kernel<long>"
    )


def test_short_name_drops_the_return_type_and_folds_nested_templates():
    name = (
        "std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type "
        "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long)"
    )
    assert short_name(name) == "fused_add_rms_norm_kernel<c10::BFloat16, 8>"
    assert (
        short_name("void at::native::elementwise_kernel<(int)128, (int)4, F<G<int>>>(int, T3)")
        == "elementwise_kernel<128, 4, F<G<int>>>"  # no functor; short once casts are dropped
    )


def test_fit_cuts_template_arguments_at_the_end_and_plain_names_in_the_middle():
    assert (
        fit("multimem_all_reduce_kernel<c10::BFloat16, 16>", 32)
        == "multimem_all_reduce_kernel<c10…>"
    )
    cut = fit("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x32x64_MI16x16x1_SN_WG64_4_1", 24)
    assert len(cut) == 24 and cut.startswith("Cijk_") and cut.endswith("4_1") and "…" in cut
    assert (
        fit("vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>", 28)
        == "fused_add_rms_norm_kernel<…>"
    )


@pytest.fixture(scope="module")
def dense_breakdown():
    return pipeline.breakdown(DENSE)


@pytest.mark.parametrize("width", WIDTHS)
def test_breakdown_leads_with_the_verify_step_and_shows_its_numbers(dense_breakdown, width):
    summary = dense_breakdown.summary()
    text = render(width, lambda c: show.print_breakdown(dense_breakdown, c))
    assert widest(text) <= width
    lead = summary["groups"][show.lead_group(summary["groups"])]
    assert lead["name"] == "verifyprof.verify" and "sweep" not in lead["variant"]
    for phase, stats in lead["phases"].items():
        if stats["mean"]:
            line = row_of(text, f"{phase} ")
            assert (
                f"{stats['mean'] / 1e6:.3f}" in line and f"{100 * stats['share']:.1f}" in line
            )  # % is the JSON's mean-based share
    assert "% of mean" in text and "535 kernels, 553 launches" in text


def test_breakdown_default_output_is_short_and_all_restores_every_table(dense_breakdown):
    short = render(120, lambda c: show.print_breakdown(dense_breakdown, c))
    full = render(120, lambda c: show.print_breakdown(dense_breakdown, c, show_all=True))
    groups = dense_breakdown.summary()["groups"]
    assert len(short.splitlines()) < 45 < len(full.splitlines())
    assert "Other steps (10 groups" in short
    assert short.count("% of mean") == 1 and full.count("% of mean") == len(groups)
    for group in groups:  # every other group is one row: its mean wall time is there
        assert f"{group['wall_ns']['mean'] / 1e6:.3f}" in short


def test_other_step_labels_at_80_columns_keep_the_attribute_that_tells_them_apart(
    dense_breakdown,
):
    """The t(n) sweep's five verify groups differ in tokens=: a label cut in its middle read
    ``verify [tokens…weep=1]`` five times."""
    text = render(80, lambda c: show.print_breakdown(dense_breakdown, c))
    rows = [line for line in text.splitlines() if line.startswith("verify [tokens=")]
    assert [row.split("]")[0].split()[1].rstrip("…") for row in rows] == [
        "[tokens=1",
        "[tokens=2",
        "[tokens=4",
        "[tokens=8",
        "[tokens=16",
    ]


def test_fit_label_keeps_the_name_and_cuts_the_attributes_at_their_end():
    assert fit_label("draft_extend [tokens=4 sweep=1]", 22) == "draft_extend [tokens…]"
    assert fit_label("verify [tokens=4]", 22) == "verify [tokens=4]"
    assert len(fit_label("a_very_long_step_name_indeed [x=1]", 12)) == 12  # a name too long


def test_breakdown_header_names_the_default_ranges_in_words_within_80_columns(dense_breakdown):
    text = render(80, lambda c: show.print_breakdown(dense_breakdown, c))
    assert "the default --range" in text and "TARGET_VERIFY" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_breakdown_header_shows_a_custom_step_regex_unescaped_on_one_line(dense_breakdown):
    regex = r"^verifyprof\.(verify|draft)(\s|$)"
    custom = dataclasses.replace(
        dense_breakdown, options={**dense_breakdown.options, "range": regex}
    )
    text = render(80, lambda c: show.print_breakdown(custom, c))
    assert row_of(text, "steps: ranges whose text matches the regex ").endswith(
        regex
    )  # one line, copyable
    assert "\\\\." not in text


@pytest.mark.parametrize("width", WIDTHS)
def test_collective_kernels_of_the_b200_rank_fit_with_their_bandwidth(width):
    result = pipeline.breakdown(B200, whole_trace=True)
    stats = result.summary()["collective_kernels"]["allreduce"]
    text = render(width, lambda c: show.print_breakdown(result, c))
    line = row_of(text, "allreduce  ", last=True)
    assert f"{stats['kernel_busbw_gbps_p50']:.1f}" in line and str(stats["kernels"]) in line
    assert widest(text) <= width


def test_whatif_assumptions_wrap_indented_at_80_columns():
    from verifyprof.model.decision.whatif import WhatifOptions

    ranking = pipeline.whatif(
        WhatifOptions(source=str(DENSE), manifest=DENSE.parent / "manifest.json")
    ).to_json()
    text = render(80, lambda c: show_whatif.print_ranking(ranking, c, details=True))
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Assumptions"))
    stop = lines.index("not applicable:") if "not applicable:" in lines else len(lines)
    body = [
        line
        for line in lines[start + 1 : stop]
        if line.strip() and not line[0].isdigit() and not line.startswith("Shared by")
    ]
    starts = ("   - ", "   ! ", "     ", " blocked: ")
    assert body and all(line.startswith(starts) for line in body), [
        line for line in body if not line.startswith(starts)
    ]
    assert any(
        line.startswith("     ") and line[5] != " " for line in body
    )  # some assumption did wrap, under its text
    commands = (
        "--",
        "no --",
        "verifyprof ",
    )  # printed whole on their own lines, to be copied (issue 33)
    assert max(len(line) for line in lines if not line.strip().startswith(commands)) <= 80
    for cand in ranking["candidates"]:
        assert f"{cand['tokens_per_s']:.1f}" in text


def test_console_script_in_a_pipe_fits_80_columns():
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    script = Path(sys.executable).parent / "verifyprof"
    done = subprocess.run(
        [str(script), "kernels", str(B200), "--top", "12"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    data = kernel_data(B200, top=12)
    for row in data["kernels"]:
        assert f"{row['total_ns'] / 1e6:.3f}" in done.stdout and str(row["count"]) in done.stdout
    assert "multimem_all_reduce_kernel" in done.stdout


def test_a_groups_largest_phase_is_a_part_of_its_cost_and_within_100_percent():
    """Graph-mode steps whose windows hold other steps' GPU work (other_work: the accept's
    window holds the verify replay it waits on), which is no part of the step's cost; the
    largest phase listed is one of the cost's, its share <= 100%."""
    result = pipeline.breakdown(REPO / "traces/workload-dense-graph/trace.sqlite.gz")
    text = render(120, lambda c: show.print_breakdown(result, c))
    rows = [line for line in text.splitlines() if line.rstrip().endswith("%")]
    others = [g for g in result.summary()["groups"] if g["phases"]["other_work"]["mean"] > 0]
    assert rows and others  # the trace has steps whose windows hold other steps' work
    shares = [int(line.rstrip()[:-1].split()[-1]) for line in rows]
    assert all(0 <= s <= 100 for s in shares), rows
    assert not any(" other_work " in line for line in rows)
