"""The column-wise encoder of breakdown JSON's steps gives the bytes orjson gives the step records,
on real traces (one process, many ranks with comm columns, whole trace) and on edited steps."""

from __future__ import annotations

import json

import numpy as np
import orjson
import pandas as pd
import pytest
from conftest import OWN_TRACES, PUBLIC
from test_parallel import rank_file

from verifyprof import pipeline
from verifyprof.attribution.breakdown import breakdown
from verifyprof.contracts.schema import frame_from_json, step_records
from verifyprof.pipeline.parallel import ParallelOptions
from verifyprof.report.step_json import steps_json, steps_json_batches
from verifyprof.trace import load_trace

OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def records_json(rows) -> bytes:
    """What orjson makes of the step records: the reference the encoder must equal byte for byte."""
    return orjson.dumps(step_records(rows), option=OPTIONS)[1:-1]


@pytest.mark.parametrize(
    "trace, whole",
    [
        (OWN_TRACES / "workload-moe-graph" / "trace.sqlite.gz", False),
        (OWN_TRACES / "workload-dense-pipelined-eager" / "trace.sqlite.gz", False),
        (PUBLIC / "kineto" / "tracelens_mi300x_sglang_qwen3-8b_decode.json.gz", True),
        (PUBLIC / "nsys" / "nsysai_mfu_2gpu_before_nsys2026.2.sqlite.gz", True),
    ],
    ids=["moe-graph", "pipelined", "mi300x-whole", "nsys-2gpu-whole"],
)
def test_steps_encode_to_the_bytes_orjson_gives_their_records(trace, whole):
    rows = breakdown(load_trace(trace), whole_trace=whole).steps
    assert len(rows) > 0
    assert steps_json(rows) == records_json(rows)


def test_many_rank_steps_with_comm_columns_encode_identically(tmp_path):
    source = PUBLIC / "kineto" / "hta_nccl_data_a100_rank0of2.json.gz"
    for rank in (0, 1):  # two ranks of the HTA A100 trace (NCCL allreduce), 1 ms apart
        rank_file(
            source, tmp_path / f"run-TP-{rank}.trace.json.gz", rank, base_shift_ns=rank * 1_000_000
        )
    rows = pipeline.breakdown(
        [tmp_path], whole_trace=True, parallel=ParallelOptions(workers=1)
    ).steps
    assert {"comm_calls", "comm_wait_ns", "comm_transfer_ns"} <= set(rows.columns)
    assert steps_json(rows) == records_json(rows)


def test_any_slice_of_the_steps_encodes_identically():
    rows = breakdown(load_trace(OWN_TRACES / "workload-moe-graph" / "trace.sqlite.gz")).steps
    for start, stop in ((0, 1), (3, 17), (len(rows) - 1, len(rows))):
        assert steps_json(rows.iloc[start:stop]) == records_json(rows.iloc[start:stop])
    assert steps_json(rows.iloc[0:0]) == b""


def test_names_needing_escapes_and_unshared_attrs_encode_identically():
    rows = breakdown(
        load_trace(OWN_TRACES / "workload-dense-eager" / "trace.sqlite.gz")
    ).steps.copy()
    rows["name"] = [f'verify "q{i}" \\ tab\t naïve ✓ \x01' for i in range(len(rows))]
    rows["text"] = rows["name"] + " bs=1"
    rows["attrs"] = [
        {"bs": str(i), "note": 'a"b'} for i in range(len(rows))
    ]  # one dict per row, none shared
    assert steps_json(rows) == records_json(rows)


def test_steps_read_back_from_json_reencode_to_the_same_document():
    result = breakdown(load_trace(OWN_TRACES / "workload-moe-graph" / "trace.sqlite.gz"))
    document = json.loads(json.dumps(result.to_json()))
    rows = frame_from_json(document).steps
    assert json.loads(b"[" + steps_json(rows) + b"]") == document["steps"]


def test_a_column_of_another_type_takes_the_records_path():
    rows = breakdown(
        load_trace(OWN_TRACES / "workload-dense-eager" / "trace.sqlite.gz")
    ).steps.copy()
    rows["wall_ns"] = rows["wall_ns"].astype(
        float
    )  # orjson writes 123.0: the integer cast would not
    assert steps_json(rows) == records_json(rows)
    assert b'"wall_ns":' + str(float(rows["wall_ns"].iloc[0])).encode() in steps_json(rows)


def test_a_nullable_integer_column_with_a_missing_value_is_refused_as_the_records_path_refuses_it():
    rows = breakdown(
        load_trace(OWN_TRACES / "workload-dense-eager" / "trace.sqlite.gz")
    ).steps.copy()
    rows["wall_ns"] = rows["wall_ns"].astype("Int64")
    rows.loc[rows.index[0], "wall_ns"] = pd.NA  # never written as a bare nan (invalid JSON)
    with pytest.raises(TypeError):
        records_json(rows)
    with pytest.raises(TypeError):
        steps_json(rows)


def test_names_and_counts_of_other_types_encode_as_the_records_path_encodes_them():
    rows = breakdown(
        load_trace(OWN_TRACES / "workload-dense-eager" / "trace.sqlite.gz")
    ).steps.copy()
    rows["mode"] = [
        [1, 1.0, True, -0.0, None][i % 5] for i in range(len(rows))
    ]  # equal values of distinct types
    rows["kernels"] = rows["kernels"].astype(np.uint64) + np.uint64(1 << 63)  # past int64
    assert steps_json(rows) == records_json(rows)


@pytest.mark.parametrize("encodable", [True, False], ids=["encoder", "records-path"])
def test_batches_join_to_the_whole_frames_records_marks_included(encodable):
    """The output is written a batch of steps at a time; every batch's records have the keys the
    whole frame's have (a step mark in one batch only is still in every record)."""
    rows = breakdown(load_trace(OWN_TRACES / "workload-moe-graph" / "trace.sqlite.gz")).steps
    rows = rows.assign(integrity=np.zeros(len(rows), np.int64))
    rows.loc[rows.index[1], "integrity"] = 2  # only the first batch has a marked step
    if not encodable:
        rows["wall_ns"] = rows["wall_ns"].astype(float)
    batches = list(steps_json_batches(rows, 3))
    assert len(batches) == -(-len(rows) // 3) > 2
    assert b"".join(batches) == records_json(rows) == steps_json(rows)
    assert all(r["integrity"] in (0, 2) for r in json.loads(b"[" + b"".join(batches) + b"]"))
