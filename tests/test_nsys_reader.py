"""nsys SQLite reader: real public exports (schemas 2.9 to 3.25) and the generator's exports (bad
input: tests/test_nsys_bad_input.py).

Facts come from /work/shared/traces/public/PROVENANCE.md and are cross-checked against direct
SQL on the same file.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import PUBLIC, public_export  # tests/data/public: the shared public traces

from verifyprof.trace import load_trace
from verifyprof.trace.events import (
    API_KIND_DRIVER,
    API_KIND_RUNTIME,
    COPY_KIND_MEMCPY,
    RANGE_KIND_PUSHPOP,
    RANGE_KIND_STARTEND,
)
from verifyprof.trace.nsys.nvtx_ranges import nvtx_depth
from verifyprof.trace.nsys.reader import read_nsys_sqlite

REPO = Path(__file__).resolve().parents[1]

NSYS = PUBLIC / "nsys"
# every public export as SQLite (the larger ones are tracked gzipped: conftest.public_export)
NAMES = {p.name.removesuffix(".gz") for p in NSYS.glob("*.sqlite*")} if NSYS.is_dir() else set()
EXPORTS = [public_export(name) for name in sorted(NAMES)]
PIPIT = public_export("pipit_saxpy_mpi_a100_nsys2022.2.sqlite")
FLAMEOX = NSYS / "flameox_cudagraph_rtx3060_nsys2025.5.sqlite"
MFU_BEFORE = public_export("nsysai_mfu_2gpu_before_nsys2026.2.sqlite")
MFU_AFTER = public_export("nsysai_mfu_2gpu_after_nsys2026.2.sqlite")
MOCK = NSYS / "nsysai_mock_rtx3080_nsys2026.1.sqlite"

needs_public = pytest.mark.public_traces


def sql(path: Path, query: str) -> list[tuple]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def copy_of(src: Path, tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copyfile(src, dst)
    return dst


def edit(path: Path, *statements: str) -> None:
    con = sqlite3.connect(path)
    for statement in statements:
        con.execute(statement)
    con.commit()
    con.execute("VACUUM")
    con.close()


def fingerprint(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return hashlib.sha256(path.read_bytes()).hexdigest(), stat.st_size, stat.st_mtime_ns


@pytest.fixture(scope="module")
def traces():
    return {path.name: read_nsys_sqlite(path) for path in EXPORTS}


# --- every public export ---------------------------------------------------------------------


@needs_public
@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.name)
def test_public_export_loads_and_satisfies_the_model_contract(path: Path, traces):
    trace = traces[path.name]
    trace.validate()
    assert trace.format == "nsys-sqlite"
    assert trace.source == [path]
    assert len(trace.kernels) > 0
    assert (trace.names("kernels") != "").all()
    assert (
        trace.meta["nsys_schema_version"]
        == sql(path, f"SELECT value FROM {meta_table(path)} WHERE name = 'EXPORT_SCHEMA_VERSION'")[
            0
        ][0]
    )


@needs_public
@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.name)
def test_public_export_kernel_count_and_busy_time_match_sql(path: Path, traces):
    kernels = traces[path.name].kernels
    count, busy = sql(path, 'SELECT count(*), sum("end" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL')[
        0
    ]
    assert len(kernels) == count
    assert int((kernels["end"] - kernels["start"]).sum()) == busy


@needs_public
@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.name)
def test_public_export_kernels_per_process_and_device_match_sql(path: Path, traces):
    kernels = traces[path.name].kernels
    expected = {
        (pid, dev): n
        for pid, dev, n in sql(
            path,
            "SELECT (globalPid >> 24) & 16777215, deviceId, count(*) FROM"
            " CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1, 2",
        )
    }
    assert dict(Counter(zip(kernels["pid"].tolist(), kernels["device"].tolist()))) == expected


@needs_public
@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.name)
def test_public_export_kernel_names_are_the_demangled_strings(path: Path, traces):
    expected = Counter(
        dict(
            sql(
                path,
                "SELECT s.value, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON"
                " s.id = k.demangledName GROUP BY 1",
            )
        )
    )
    assert Counter(traces[path.name].names("kernels").tolist()) == expected


@needs_public
@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.name)
def test_public_export_launch_calls_are_joined_within_their_process(path: Path, traces):
    """Every kernel whose launch was captured finds it on (pid, correlation), as SQL's per-process
    join does."""
    trace = traces[path.name]
    expected = sql(
        path,
        """
        SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k
        WHERE EXISTS (SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME r
                      WHERE r.correlationId = k.correlationId
                        AND ((r.globalTid >> 24) & 16777215) = ((k.globalPid >> 24) & 16777215))""",
    )[0][0]
    api_keys = set(zip(trace.api["pid"].tolist(), trace.api["correlation"].tolist()))
    found = sum(
        (p, c) in api_keys
        for p, c in zip(trace.kernels["pid"].tolist(), trace.kernels["correlation"].tolist())
    )
    assert found == expected


@needs_public
@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.name)
def test_public_export_api_names_carry_no_abi_suffix(path: Path, traces):
    names = set(traces[path.name].names("api").tolist())
    assert names and not any(
        n.rsplit("_", 1)[-1].startswith("v") and n.rsplit("_v", 1)[-1].isdigit() for n in names
    )


@needs_public
@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.name)
def test_public_export_event_tables_are_sorted_by_start(path: Path, traces):
    trace = traces[path.name]
    for table in ("kernels", "copies", "graphs", "api", "ranges"):
        start = getattr(trace, table)["start"].to_numpy()
        assert (np.diff(start) >= 0).all(), table


@needs_public
@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.name)
def test_reading_leaves_the_export_byte_identical(path: Path):
    before = fingerprint(path)
    read_nsys_sqlite(path)
    assert fingerprint(path) == before


@needs_public
@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.name)
def test_load_trace_dispatches_sqlite_exports_to_this_reader(path: Path):
    trace = load_trace(path)
    assert (
        trace.format == "nsys-sqlite"
        and len(trace.kernels) == sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
    )


def meta_table(path: Path) -> str:
    tables = {t for (t,) in sql(path, "SELECT name FROM sqlite_master")}
    return "META_DATA_EXPORT" if "META_DATA_EXPORT" in tables else "EXPORT_META_DATA"


# --- pipit: nsys 2022.2, schema 2.9.1 --------------------------------------------------------


@needs_public
def test_pipit_schema_2_9_metadata_comes_from_export_meta_data(traces):
    meta = traces[PIPIT.name].meta
    assert (meta["nsys_schema_version"], meta["nsys_version"]) == ("2.9.1", "2022.2.1.31")
    assert (
        meta["capture_start_utc_ns"]
        == sql(PIPIT, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")[0][0]
    )


@needs_public
def test_pipit_has_five_saxpy_kernels_on_the_a100(traces):
    trace = traces[PIPIT.name]
    assert (
        trace.names("kernels").tolist() == ["saxpy(double *, double *, double *, double, int)"] * 5
    )
    assert trace.devices[["device", "name", "sm_count", "compute_capability"]].values.tolist() == [
        [0, "NVIDIA A100-SXM4-40GB", 108, "8.0"]
    ]


@needs_public
def test_pipit_duplicated_runtime_rows_are_kept_once_per_correlation(traces):
    """nsys 2022.2 writes each call twice (cudaLaunchKernel and cudaLaunchKernel_v7000): 95 rows,
    one kept per call."""
    api = traces[PIPIT.name].api
    assert sql(PIPIT, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME")[0][0] == 95
    assert Counter(traces[PIPIT.name].names("api").tolist()) == {
        "cudaLaunchKernel": 5,
        "cudaMemcpy": 15,
    }
    assert not api.duplicated(["pid", "correlation"]).any()
    kept = set(zip(api["correlation"].tolist(), api["start"].tolist()))
    suffixed = set(
        sql(
            PIPIT,
            """SELECT r.correlationId, r.start
                 FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
                 WHERE s.value IN ('cudaLaunchKernel_v7000', 'cudaMemcpy_v3020')""",
        )
    )
    assert kept == suffixed  # the _vNNNN row (eventClass 0) is the one kept


@needs_public
def test_pipit_nvtx_names_resolve_from_both_text_and_text_id(traces):
    trace = traces[PIPIT.name]
    ranges = trace.ranges
    names = trace.names("ranges")
    domains = trace.strings.lookup(ranges["domain_id"].to_numpy())
    assert (
        len(ranges) == 22
    )  # 22 push/pop; the eventType 39 thread name and 75 domain rows are not ranges
    assert Counter(names[domains == ""].tolist()) == {"saxpy": 5}  # text, default domain
    assert Counter(names[domains == "MPI"].tolist()) == {
        "MPI_Send": 10,
        "MPI_Recv": 5,
        "MPI_Init": 1,
        "MPI_Finalize": 1,
    }  # textId
    assert (ranges["kind"] == RANGE_KIND_PUSHPOP).all() and (ranges["depth"] == 0).all()
    assert (ranges["pid"] == 1230493).all() and (ranges["tid"] == 302119224788637).all()


@needs_public
def test_pipit_process_is_named_and_owns_its_device_without_a_rank(traces):
    processes = traces[PIPIT.name].processes
    assert processes[["pid", "host_pid", "name", "rank", "device"]].values.tolist() == [
        [1230493, 1230493, "./saxpy-mpi-cuda", -1, 0]
    ]


@needs_public
def test_pipit_memcpy_rows_keep_direction_and_bytes(traces):
    trace = traces[PIPIT.name]
    copies = trace.copies
    assert (copies["kind"] == COPY_KIND_MEMCPY).all()
    expected = Counter(
        {
            ("Memcpy HtoD" if k == 1 else "Memcpy DtoH" if k == 2 else f"kind {k}", b): n
            for k, b, n in sql(
                PIPIT,
                "SELECT copyKind, bytes, count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1, 2",
            )
        }
    )
    assert Counter(zip(trace.names("copies").tolist(), copies["bytes"].tolist())) == expected


# --- flameox: nsys 2025.5, --cuda-graph-trace=graph -----------------------------------------------


@needs_public
def test_flameox_whole_graph_rows_are_read_with_a_warning(traces):
    trace = traces[FLAMEOX.name]
    assert len(trace.kernels) == 3 and len(trace.graphs) == 2
    assert trace.graphs[["correlation", "graph_id", "device"]].values.tolist() == [
        [141, 1, 0],
        [142, 1, 0],
    ]
    assert any(
        "--cuda-graph-trace=graph" in w
        and "re-capture with --cuda-graph-trace=node" in w
        and "per-kernel phases inside graphs are unavailable" in w
        for w in trace.warnings
    )


@needs_public
def test_flameox_graph_rows_link_to_their_cuda_graph_launch(traces):
    trace = traces[FLAMEOX.name]
    api = trace.api.set_index("correlation")
    launch_names = trace.strings.lookup(
        api.loc[trace.graphs["correlation"].to_numpy(), "name_id"].to_numpy()
    )
    assert launch_names.tolist() == ["cudaGraphLaunch", "cudaGraphLaunch"]


@needs_public
def test_flameox_launch_captured_into_the_graph_is_dropped(traces):
    """4 cudaLaunchKernel calls, one made during stream capture (no GPU op of its own): 3 kept."""
    assert (
        sql(
            FLAMEOX,
            """SELECT count(*)
                 FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
                 WHERE s.value = 'cudaLaunchKernel_v7000'""",
        )[0][0]
        == 4
    )
    names = Counter(traces[FLAMEOX.name].names("api").tolist())
    assert names == {
        "cudaLaunchKernel": 3,
        "cudaGraphLaunch": 2,
        "cudaStreamSynchronize": 2,
        "cudaMemcpyAsync": 1,
    }


@needs_public
def test_node_mode_export_has_no_graph_warning(traces):
    assert not any("cuda-graph-trace" in w for w in traces[MFU_BEFORE.name].warnings)


# --- nsys-ai mfu pair: 2 processes, 2 GPUs, NCCL, ~19k NVTX ranges --------------------------------


@needs_public
def test_mfu_two_processes_each_drive_one_gpu_and_get_ranks(traces):
    processes = traces[MFU_BEFORE.name].processes
    assert processes[["pid", "name", "rank", "device"]].values.tolist() == [
        [144, "python3", 0, 0],
        [145, "python3", 1, 1],
    ]
    assert traces[MFU_BEFORE.name].ranks == [0, 1]


@needs_public
def test_mfu_devices_come_from_kernels_without_target_info_gpu(traces):
    assert "TARGET_INFO_GPU" not in {
        t for (t,) in sql(MFU_BEFORE, "SELECT name FROM sqlite_master")
    }
    devices = traces[MFU_BEFORE.name].devices
    assert devices["device"].tolist() == [0, 1]
    assert (devices["name"] == "").all() and (devices["sm_count"] == -1).all()


@pytest.mark.parametrize(
    "path,sendrecv", [(MFU_BEFORE, 66), (MFU_AFTER, 62)], ids=["before", "after"]
)
@needs_public
def test_mfu_nccl_sendrecv_kernels(path: Path, sendrecv: int, traces):
    names = traces[path.name].names("kernels")
    assert sum(n.startswith("ncclDevKernel_SendRecv") for n in names) == sendrecv


@needs_public
def test_mfu_every_nvtx_range_is_read(traces):
    assert (
        len(traces[MFU_BEFORE.name].ranges)
        == 19_118
        == sql(MFU_BEFORE, "SELECT count(*) FROM NVTX_EVENTS")[0][0]
    )
    assert len(traces[MFU_AFTER.name].ranges) == 17_113


@needs_public
def test_mfu_nccl_ranges_resolve_registered_strings_in_their_domain(traces):
    trace = traces[MFU_BEFORE.name]
    names = trace.names("ranges")
    domains = trace.strings.lookup(trace.ranges["domain_id"].to_numpy())
    # domain 1 has no eventType 75 row in this time-sliced export: it is named by its number
    assert Counter(names[domains == "domain 1"].tolist()) == {
        "ncclSend": 132,
        "ncclRecv": 132,
        "ncclCommCount": 66,
        "ncclGroupStart": 66,
        "ncclGroupEnd": 66,
    }
    texts = Counter(
        dict(
            sql(
                MFU_BEFORE, "SELECT text, count(*) FROM NVTX_EVENTS WHERE textId IS NULL GROUP BY 1"
            )
        )
    )
    assert Counter(names[domains == ""].tolist()) == texts and sum(texts.values()) == 18_656


@needs_public
def test_mfu_driver_launches_are_marked_driver_api(traces):
    trace = traces[MFU_BEFORE.name]
    names = trace.names("api")
    kinds = trace.api["kind"].to_numpy()
    assert set(kinds[names == "cuLaunchKernelEx"]) == {API_KIND_DRIVER}
    assert set(kinds[names == "cudaLaunchKernel"]) == {API_KIND_RUNTIME}


@needs_public
def test_mfu_nvtx_depth_matches_a_stack_walk(traces):
    """Vectorised depth == the nesting level found by walking each thread's ranges with a stack."""
    ranges = traces[MFU_BEFORE.name].ranges
    expected = {}
    for tid, group in ranges.groupby("tid"):
        stack: list[int] = []
        for row in group.sort_values(["start", "end"], ascending=[True, False]).itertuples():
            while stack and stack[-1] <= row.start:
                stack.pop()
            expected[row.Index] = len(stack)
            stack.append(row.end)
    assert ranges["depth"].to_dict() == expected
    assert ranges["depth"].max() >= 4


@needs_public
def test_mfu_sync_calls_are_kept_even_without_a_gpu_op(traces):
    names = Counter(traces[MFU_BEFORE.name].names("api").tolist())
    expected = sql(
        MFU_BEFORE,
        """SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
                                 WHERE s.value = 'cudaStreamSynchronize_v3020'""",
    )[0][0]
    assert names["cudaStreamSynchronize"] == expected == 33


# --- mock: nsys 2026.1 ----------------------------------------------------------------------------


@needs_public
def test_mock_has_two_kernels_one_memcpy_and_its_gpu(traces):
    trace = traces[MOCK.name]
    assert len(trace.kernels) == 2
    assert trace.names("copies").tolist() == ["Memcpy DtoH"] and trace.copies["bytes"].tolist() == [
        4
    ]
    assert trace.devices[
        ["name", "sm_count", "memory_bytes", "compute_capability"]
    ].values.tolist() == [["NVIDIA GeForce RTX 3080", 68, 10736893952, "8.6"]]
    assert trace.meta["nsys_version"] == "2026.1.1.204"


# --- NVTX event types (a real export with rows of the other kinds added) --------------------------


@pytest.fixture
def pipit_with_nvtx_kinds(tmp_path):
    """pipit plus a mark (34), a start/end range ending on another thread (60) and a push/pop range
    never popped."""
    path = copy_of(PIPIT, tmp_path, "pipit_kinds.sqlite")
    tid = 302119224788637
    edit(
        path,
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES"
        f" (900000000, NULL, 34, 'a mark', {tid}, 0)",
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, endGlobalTid, domainId,"
        f" int64Value) VALUES (920000000, 930000000, 60, 'async work', {tid}, {tid + 1}, 0, 7)",
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES"
        f" (2100000000, NULL, 59, 'never popped', {tid}, 0)",
    )
    return path


@needs_public
def test_nvtx_marks_are_not_ranges(pipit_with_nvtx_kinds):
    assert "a mark" not in read_nsys_sqlite(pipit_with_nvtx_kinds).names("ranges")


@needs_public
def test_nvtx_start_end_ranges_are_kept_with_their_kind_and_payload(pipit_with_nvtx_kinds):
    trace = read_nsys_sqlite(pipit_with_nvtx_kinds)
    row = trace.ranges[trace.names("ranges") == "async work"]
    assert row[["start", "end", "kind", "depth", "tid"]].values.tolist() == [
        [920000000, 930000000, RANGE_KIND_STARTEND, 0, 302119224788637]
    ]
    assert row["payload"].tolist() == [7.0]
    assert trace.ranges["payload"][trace.names("ranges") != "async work"].isna().all()


@needs_public
def test_nvtx_ranges_without_an_end_are_dropped_and_counted(pipit_with_nvtx_kinds):
    trace = read_nsys_sqlite(pipit_with_nvtx_kinds)
    assert "never popped" not in trace.names("ranges")
    assert len(trace.ranges) == 23
    assert (
        "1 NVTX range(s) without an end (open when the capture stopped) dropped" in trace.warnings
    )


# --- column drift ---------------------------------------------------------------------------------


@needs_public
def test_columns_are_selected_by_name_so_a_kernel_table_without_graph_id_reads(tmp_path):
    """nsys 2024.5 (schema 3.13) has no KERNEL.graphId; columns may also come in another order."""
    path = copy_of(MOCK, tmp_path, "no_graph_id.sqlite")
    edit(
        path,
        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN graphId",
        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN greenContextId",
    )
    trace = read_nsys_sqlite(path)
    trace.validate()
    assert (trace.kernels["graph_id"] == -1).all()
    assert trace.kernels["start"].tolist() == [
        s for (s,) in sql(MOCK, "SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start")
    ]


@needs_public
def test_kernel_names_fall_back_to_short_names_without_demangled_names(tmp_path):
    path = copy_of(MOCK, tmp_path, "short_names.sqlite")
    edit(path, "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN demangledName")
    names = read_nsys_sqlite(path).names("kernels").tolist()
    assert names == [
        v
        for (v,) in sql(
            MOCK,
            """SELECT s.value
                 FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
                 ORDER BY k.start""",
        )
    ]


# --- nesting depth --------------------------------------------------------------------------------


def test_nvtx_depth_counts_enclosing_ranges_per_thread_and_kind():
    tid = np.array([1, 1, 1, 1, 2, 1])
    kind = np.array([0, 0, 0, 0, 0, 1], dtype=np.int8)
    start = np.array([0, 10, 20, 50, 5, 12])
    end = np.array([100, 40, 30, 60, 50, 13])
    # thread 1: [0,100) > [10,40) > [20,30); [50,60) back at depth 1; thread 2 alone; kind 1 on its
    # own stack
    assert nvtx_depth(tid, kind, start, end).tolist() == [0, 1, 2, 1, 0, 0]


def test_nvtx_depth_treats_touching_and_zero_length_ranges_as_siblings():
    tid = np.zeros(4, dtype=np.int64)
    kind = np.zeros(4, dtype=np.int8)
    start = np.array([0, 10, 10, 10])
    end = np.array([10, 20, 10, 15])
    # [0,10) ends where [10,20) starts: siblings. Ranges starting together nest longest first, so
    # [10,15) is inside [10,20) and the zero-length range at 10 inside both.
    assert nvtx_depth(tid, kind, start, end).tolist() == [0, 0, 2, 1]


# --- the generator's exports (bench/gen_nsys_export.py) -------------------------------------------


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import gen_nsys_export
    finally:
        sys.path.pop(0)
    path = tmp_path_factory.mktemp("gen") / "gen.sqlite"
    info = gen_nsys_export.generate(
        path, kernels=6_000, ranks=2, layers=4, graph_fraction=0.5, seed=3
    )
    return path, info, read_nsys_sqlite(path)


def test_generated_export_reads_every_kernel_and_rank(generated):
    path, info, trace = generated
    trace.validate()
    assert (
        len(trace.kernels)
        == info["kernels"]
        == sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
    )
    assert trace.ranks == [0, 1]
    assert trace.processes.set_index("rank").loc[[0, 1], "device"].tolist() == [0, 1]
    assert trace.devices["name"].tolist() == ["NVIDIA H200", "NVIDIA H200"]


def test_generated_export_ranges_are_in_the_verifyprof_domain_with_payloads(generated):
    _path, info, trace = generated
    ranges = trace.ranges
    names = trace.names("ranges")
    assert set(trace.strings.lookup(ranges["domain_id"].to_numpy())) == {"verifyprof"}
    steps = names == "verifyprof.spec_step bs=1"
    assert steps.sum() == 2 * info["steps_per_rank"]
    assert (ranges["depth"].to_numpy()[steps] == 0).all() and (
        ranges["depth"].to_numpy()[~steps] == 1
    ).all()
    verify = np.char.startswith(names.astype(str), "verifyprof.verify ")
    assert (ranges["payload"].to_numpy()[verify] == 4.0).all()


def test_generated_graph_kernels_share_their_graph_launch_correlation(generated):
    _path, info, trace = generated
    kernels = trace.kernels
    in_graph = kernels["graph_node_id"].to_numpy() >= 0
    assert in_graph.any() and (kernels["graph_id"].to_numpy()[in_graph] >= 0).all()
    api = trace.api.set_index(["pid", "correlation"])
    launched_by = trace.strings.lookup(
        api.loc[
            list(zip(kernels["pid"][in_graph], kernels["correlation"][in_graph])), "name_id"
        ].to_numpy()
    )
    assert set(launched_by) == {"cudaGraphLaunch"}
    assert (trace.names("api") == "cudaGraphLaunch").sum() == info["graph_steps"] * 2


def test_generated_export_fetches_only_launch_copy_and_sync_calls(generated):
    path, _info, trace = generated
    total = sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME")[0][0]
    names = set(trace.names("api").tolist())
    assert names == {
        "cudaLaunchKernel",
        "cuLaunchKernelEx",
        "cudaGraphLaunch",
        "cudaMemcpyAsync",
        "cudaStreamSynchronize",
    }
    assert len(trace.api) < total  # stream-capture queries and event records are not read
