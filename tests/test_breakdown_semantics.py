"""What a step's breakdown means, on traces built by hand with known answers."""

from __future__ import annotations

import pytest
from tracebuilder import TraceBuilder, late_joiner_allreduce

from verifyprof.attribution.breakdown import breakdown
from verifyprof.contracts import phases
from verifyprof.contracts.errors import NoStepsError, TraceError
from verifyprof.contracts.ranges import VERIFY, range_text


def only_row(result, name=VERIFY):
    rows = result.steps[result.steps["name"] == name]
    assert len(rows) == 1
    return rows.iloc[0]


def test_phases_sum_exactly_to_wall_time():
    b = TraceBuilder().range(VERIFY, 100, 500)
    b.kernel("flash_fwd_kernel", 150, 200, b.launch(110, 120))
    b.kernel("nvjet_tst_128x64", 190, 390, b.launch(200, 210))
    row = only_row(breakdown(b.build()))
    assert sum(int(row[p]) for p in phases.ALL) == row["wall_ns"] == 400


def test_wall_extends_to_last_kernel_end_after_range_closes():
    b = TraceBuilder().range(VERIFY, 0, 100)
    b.kernel("nvjet_tst_x", 50, 400, b.launch(10, 20))
    row = only_row(breakdown(b.build()))
    assert (row["start_ns"], row["end_ns"], row["wall_ns"], row["gpu_span_ns"]) == (
        0,
        400,
        400,
        350,
    )


def test_overlapping_compute_hides_allreduce_which_counts_only_where_exposed():
    b = TraceBuilder().range(VERIFY, 0, 1000)
    b.kernel("nvjet_tst_x", 0, 600, b.launch(0, 1), stream=1)
    b.kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 400, 1000, b.launch(2, 3), stream=2)
    row = only_row(breakdown(b.build()))
    assert row["gemm_dense"] == 600
    assert row["allreduce"] == 400  # exposed part only
    assert row["total_allreduce"] == 600  # overlapped or not


US = 1000


def test_idle_while_an_op_is_being_launched_or_queued_is_launch_gap_else_host_wait():
    b = TraceBuilder().range(VERIFY, 0, 1000 * US)
    b.kernel("nvjet_tst_x", 200 * US, 300 * US, b.launch(100 * US, 110 * US))
    b.kernel("nvjet_tst_x", 400 * US, 500 * US, b.launch(350 * US, 360 * US))
    row = only_row(breakdown(b.build()))
    # launch intervals [call start, kernel start): [100, 200) and [350, 400) us
    assert row["launch_gap"] == (100 + 50) * US
    # the host was elsewhere: before the first launch, 300-350 us (a pause longer than the
    # 50 us bridge), and after the last kernel
    assert row["host_wait"] == (100 + 50 + 500) * US


def test_back_to_back_eager_launches_slower_than_their_kernels_are_all_launch_gap():
    b = TraceBuilder().range(VERIFY, 0, 60 * US)
    for i in range(6):  # a launch every 10 us, each kernel runs 4 us, 5 us after its call starts
        b.kernel(
            "nvjet_tst_x",
            (10 * i + 5) * US,
            (10 * i + 9) * US,
            b.launch(10 * i * US, (10 * i + 3) * US),
        )
    row = only_row(breakdown(b.build()))
    assert row["gemm_dense"] == 24 * US
    assert row["host_wait"] == 1 * US  # only after the last kernel ends (59 -> 60)
    assert row["launch_gap"] == (60 - 24 - 1) * US


def test_nested_ranges_each_get_the_kernels_launched_inside_them():
    b = TraceBuilder().range("verifyprof.spec_step", 0, 1000).range(VERIFY, 100, 500)
    b.kernel("nvjet_tst_x", 150, 250, b.launch(120, 130))
    b.kernel("nvjet_tst_x", 650, 750, b.launch(600, 610))
    result = breakdown(b.build())
    assert only_row(result, "verifyprof.spec_step")["kernels"] == 2
    assert only_row(result, VERIFY)["kernels"] == 1


def test_kernels_are_attributed_by_launch_time_not_by_when_they_run():
    # Overlap scheduling: the range closes before its kernel runs; a later range must not claim it.
    b = TraceBuilder().range(VERIFY, 0, 100).range("verifyprof.draft", 200, 300)
    b.kernel("nvjet_tst_x", 250, 280, b.launch(10, 20))
    result = breakdown(b.build())
    assert only_row(result, VERIFY)["kernels"] == 1
    assert only_row(result, "verifyprof.draft")["kernels"] == 0


def test_correlation_ids_are_matched_within_the_launching_process_only():
    b = TraceBuilder().range(VERIFY, 0, 100, pid=1, tid=11).process(1, 0, 0).process(2, 1, 1)
    corr = b.launch(10, 20, pid=1, tid=11)
    b.kernel("nvjet_tst_x", 30, 60, corr, device=0, pid=1)
    b.api.append(dict(b.api[-1], pid=2, tid=22))  # same correlation id in another process
    b.kernel("nvjet_tst_x", 30, 90, corr, device=1, pid=2)
    result = breakdown(b.build())
    rows = result.steps[result.steps["name"] == VERIFY]
    assert rows["device"].tolist() == [0]
    assert rows["rank"].tolist() == [0]


def test_a_graph_launch_brings_all_of_its_kernels():
    b = TraceBuilder().range(VERIFY, 0, 100)
    corr = b.launch(10, 20, api="cudaGraphLaunch")
    for i in range(5):
        b.kernel("nvjet_tst_x", 30 + 10 * i, 38 + 10 * i, corr)
    row = only_row(breakdown(b.build()))
    assert (row["kernels"], row["launches"], row["graph_launches"], row["mode"]) == (
        5,
        1,
        1,
        "graph",
    )


def test_a_step_that_launched_nothing_is_all_host_wait_on_no_device():
    b = TraceBuilder().range(VERIFY, 0, 100).range("verifyprof.accept", 200, 260)
    b.kernel("nvjet_tst_x", 30, 60, b.launch(10, 20))
    row = only_row(breakdown(b.build()), "verifyprof.accept")
    assert (row["device"], row["wall_ns"], row["host_wait"], row["mode"]) == (-1, 60, 60, "none")


def test_memcpy_is_classified_by_record_type():
    b = TraceBuilder().range(VERIFY, 0, 100)
    b.memcpy(10, 50, b.launch(5, 8, api="cudaMemcpyAsync"))
    row = only_row(breakdown(b.build()))
    assert row["memcpy"] == 40


def test_attributes_in_range_text_are_parsed_and_steps_grouped_by_base_name():
    b = TraceBuilder().range(range_text(VERIFY, bs=2, tokens=4, graph=True), 0, 100)
    b.kernel("nvjet_tst_x", 30, 60, b.launch(10, 20))
    result = breakdown(b.build())
    record = result.to_json()["steps"][0]
    assert record["name"] == VERIFY
    assert record["attrs"] == {"bs": "2", "tokens": "4", "graph": "1"}


def test_no_matching_range_lists_the_most_frequent_range_names():
    b = (
        TraceBuilder()
        .range("forward", 0, 100)
        .range("forward", 200, 300)
        .range("backward", 400, 500)
    )
    b.kernel("nvjet_tst_x", 30, 60, b.launch(10, 20))
    with pytest.raises(NoStepsError, match=r"'forward' \(2\), 'backward' \(1\)"):
        breakdown(b.build(), step_regex="verify")


def test_whole_trace_makes_one_step_per_device():
    b = TraceBuilder()
    b.kernel("nvjet_tst_x", 0, 100, b.launch(0, 1), device=0)
    b.kernel("nvjet_tst_x", 50, 300, b.launch(2, 3), device=1)
    result = breakdown(b.build(), whole_trace=True)
    assert result.steps["device"].tolist() == [0, 1]
    assert result.steps["wall_ns"].tolist() == [100, 250]


def test_a_trace_without_gpu_work_is_an_empty_capture_error():
    b = TraceBuilder().range(VERIFY, 0, 100)
    b.launch(10, 20)
    with pytest.raises(TraceError, match="empty capture"):
        breakdown(b.build())


def test_collective_wait_for_the_slowest_rank_is_separated_from_transfer():
    b = late_joiner_allreduce(VERIFY)  # rank 0 joins at 100, rank 1 at 400; both finish at 500
    result = breakdown(b.build())
    rows = result.steps.sort_values("rank")
    assert rows["comm_wait_ns"].tolist() == [300, 0]
    assert rows["comm_transfer_ns"].tolist() == [100, 100]
    stats = result.summary()["collectives"]["allreduce"]
    assert stats["spread_ns_p50"] == 300


def test_counts_give_gpu_ops_per_phase_of_each_step():
    b = TraceBuilder().range(VERIFY, 0, 1000)
    for i in range(3):
        b.kernel(
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
            100 * i + 10,
            100 * i + 50,
            b.launch(100 * i, 100 * i + 5),
        )
    b.kernel("nvjet_tst_x", 500, 600, b.launch(400, 405))
    record = breakdown(b.build()).to_json()["steps"][0]
    assert record["counts"]["allreduce"] == 3 and record["counts"]["gemm_dense"] == 1
    assert sum(record["counts"].values()) == record["kernels"] == 4


def test_sweeping_in_small_chunks_gives_the_same_phases_as_one_pass():
    from conftest import OWN_TRACES

    from verifyprof.attribution import sweep as sweep_module
    from verifyprof.trace import load_trace

    trace = load_trace(OWN_TRACES / "workload-dense-graph" / "trace.sqlite.gz")
    whole = breakdown(trace).steps
    original = sweep_module.CHUNK_INTERVALS
    try:
        sweep_module.sweep.__defaults__ = (7,)  # a chunk boundary every few windows
        chunked = breakdown(trace).steps
    finally:
        sweep_module.sweep.__defaults__ = (original,)
    assert whole[list(phases.ALL)].equals(chunked[list(phases.ALL)])


def test_releasing_event_tables_keeps_the_result_and_the_reported_counts():
    from conftest import OWN_TRACES

    from verifyprof.trace import load_trace

    path = OWN_TRACES / "workload-moe-graph" / "trace.sqlite.gz"
    kept = breakdown(load_trace(path))
    released = breakdown(load_trace(path), release=True)
    assert released.trace.kernels.empty
    assert released.trace_info()["kernels"] == kept.trace_info()["kernels"] > 0
    assert released.steps[list(phases.ALL)].equals(kept.steps[list(phases.ALL)])
