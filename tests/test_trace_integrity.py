"""No silent nonsense (issue 22): rows a trace holds that cannot be taken at face value are
counted and named (one record per kind and table: count, table, example), reach the warnings,
the breakdown JSON's ``trace.integrity`` and stderr, and mark the steps they touch; where the
numbers cannot be trusted at all, the command exits 2 with one line.

Every case edits a copy of a real trace: the project's own H200 export (pipelined dense eager
workload, 16k kernels) with sqlite3, public Kineto traces as JSON.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import orjson
import pandas as pd
import pytest
from cli_helpers import verifyprof
from conftest import OWN_TRACES, PUBLIC

from verifyprof.attribution.breakdown import breakdown
from verifyprof.contracts.schema import frame_from_json, step_records
from verifyprof.report.step_json import ORJSON_OPTIONS, steps_json
from verifyprof.trace import load_trace

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
PIPELINED = OWN_TRACES / "workload-dense-pipelined-eager" / "trace.sqlite.gz"
MI300X = PUBLIC / "kineto" / "tracelens_mi300x_sglang_qwen3-8b_decode.json.gz"
A100 = PUBLIC / "kineto" / "hta_nccl_data_a100_rank0of2.json.gz"
TWO_RANKS = OWN_TRACES / "torchrun-2ranks-one-gpu"
VERIFY = "verifyprof.verify"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VERIFYPROF_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pipelined") / "pipelined.sqlite"
    with gzip.open(PIPELINED, "rb") as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return path


@pytest.fixture(scope="module")
def clean(export) -> dict:
    return breakdown_json(export)


def edited(source: Path, folder: Path, *statements: str) -> Path:
    path = folder / "edited.sqlite"
    shutil.copyfile(source, path)
    con = sqlite3.connect(path)
    con.executescript(";\n".join(statements))
    con.commit()
    con.close()
    return path


def without_constraints(table: str) -> list[str]:
    """Rebuild ``table`` without NOT NULL constraints, so that NULL can be written into it."""
    return [
        f'CREATE TABLE t_copy AS SELECT * FROM "{table}"',
        f'DROP TABLE "{table}"',
        f'ALTER TABLE t_copy RENAME TO "{table}"',
    ]


def count(path: Path, query: str) -> int:
    con = sqlite3.connect(path)
    try:
        return con.execute(query).fetchone()[0]
    finally:
        con.close()


def breakdown_json(path: Path, *args: str, command: str = "breakdown") -> dict:
    done = verifyprof(command, str(path), "--json", *args)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    data["_stderr"] = done.stderr
    return data


def record(data: dict, kind: str, table: str | None = None, block: str = "trace") -> dict:
    found = [
        r
        for r in (data[block] if block else data).get("integrity", [])
        if r["kind"] == kind and (table is None or r["table"] == table)
    ]
    assert len(found) == 1, data[block].get("integrity") if block else data.get("integrity")
    return found[0]


def one_line_error(done, path: Path, *fragments: str) -> str:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"verifyprof: error: {path}: "), done.stderr
    assert "Traceback" not in done.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def kineto_copy(source: Path, folder: Path, edit, name: str = "edited.json") -> Path:
    with gzip.open(source, "rt") as handle:
        doc = json.load(handle)
    edit(doc)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(doc))
    return path


def first(events: list[dict], cat: str, n: int) -> list[dict]:
    return [e for e in events if e.get("cat") == cat and e.get("ph") == "X"][:n]


# --- duplicated rows ------------------------------------------------------------------------------


def test_duplicated_kernel_rows_are_dropped_once_counted_and_named(export, clean, tmp_path):
    path = edited(
        export, tmp_path, f"INSERT INTO {KERNEL} SELECT * FROM {KERNEL} WHERE rowid % 50 = 0"
    )
    copies = count(export, f"SELECT count(*) FROM {KERNEL} WHERE rowid % 50 = 0")
    data = breakdown_json(path)
    found = record(data, "duplicate_rows", "kernels")
    assert (found["count"], found["rows"]) == (copies, clean["trace"]["kernels"] + copies)
    assert "exact copies" in found["message"] and "device 0" in found["example"]
    assert data["trace"]["kernels"] == clean["trace"]["kernels"]
    assert [s["kernels"] for s in data["steps"]] == [s["kernels"] for s in clean["steps"]]
    assert [s["wall_ns"] for s in data["steps"]] == [s["wall_ns"] for s in clean["steps"]]
    assert found["steps"] > 0
    assert any(w == found["message"] for w in data["trace"]["warnings"])
    line = f"verifyprof: warning: {path}: {found['message']}"
    assert data["_stderr"].strip().splitlines() == [line]


def test_the_steps_duplicated_rows_fall_in_are_counted_in_their_group(export, tmp_path):
    path = edited(
        export, tmp_path, f"INSERT INTO {KERNEL} SELECT * FROM {KERNEL} WHERE rowid % 50 = 0"
    )
    groups = breakdown_json(path)["summary"]["groups"]
    verify = next(g for g in groups if g["name"] == VERIFY)
    assert 0 < verify["integrity_steps"] <= verify["rows"]
    done = verifyprof("breakdown", str(path))
    assert f"{verify['integrity_steps']} of these step rows hold rows named in the" in " ".join(
        done.stdout.split()
    )


def test_a_kernel_table_mostly_written_twice_is_refused(export, tmp_path):
    path = edited(export, tmp_path, f"INSERT INTO {KERNEL} SELECT * FROM {KERNEL}")
    one_line_error(
        verifyprof("breakdown", str(path)), path, "rows of kernels are exact copies", "trusted"
    )


def test_a_clean_trace_has_no_integrity_list(clean):
    assert "integrity" not in clean["trace"] and clean["_stderr"] == ""
    assert not any("integrity_steps" in g for g in clean["summary"]["groups"])


# --- the capture's window -------------------------------------------------------------------------


def test_kernels_before_the_capture_began_are_counted(export, tmp_path):
    path = edited(
        export,
        tmp_path,
        *without_constraints(KERNEL),
        f"UPDATE {KERNEL} SET start = -5000, end = -4000 WHERE rowid IN (1, 2, 3)",
    )
    found = record(breakdown_json(path), "outside_capture", "kernels")
    assert found["count"] == 3 and "start -5000 ns" in found["example"]


def test_kernels_after_the_capture_stopped_are_counted(export, tmp_path):
    last_end = count(export, f"SELECT max(end) FROM {KERNEL}")
    inside = count(export, f"SELECT count(*) FROM {KERNEL} WHERE end <= {last_end - 5_000_000}")
    path = edited(
        export,
        tmp_path,
        f"UPDATE ANALYSIS_DETAILS SET stopTime = startTime + {last_end - 5_000_000}",
    )
    found = record(breakdown_json(path, "--whole-trace"), "outside_capture", "kernels")
    assert found["count"] == count(export, f"SELECT count(*) FROM {KERNEL}") - inside


# --- launches that cannot be found ----------------------------------------------------------------


def test_an_export_without_its_runtime_table_is_refused_not_read_as_idle_steps(export, tmp_path):
    """It once read "0 kernels, 100% host_wait" for every step, while unlinked_ops counted every
    kernel."""
    path = edited(export, tmp_path, f"DROP TABLE {RUNTIME}")
    one_line_error(
        verifyprof("breakdown", str(path)),
        path,
        "none of the",
        "no runtime/driver API calls",
        "cannot be trusted",
    )


def test_kernels_inside_ranges_without_a_runtime_table_is_refused_not_an_empty_table(
    export, tmp_path
):
    path = edited(export, tmp_path, f"DROP TABLE {RUNTIME}")
    one_line_error(
        verifyprof("kernels", str(path), "--range", "verify"), path, "none of the", "trusted"
    )


def test_without_a_runtime_table_the_whole_trace_breakdown_says_why(export, clean, tmp_path):
    path = edited(export, tmp_path, f"DROP TABLE {RUNTIME}")
    data = breakdown_json(path, "--whole-trace")
    found = record(data, "no_launch_table", "kernels")
    assert found["count"] == found["rows"] == clean["trace"]["kernels"]
    assert "CUPTI_ACTIVITY_KIND_RUNTIME" in found["message"]


def test_kernels_without_a_correlation_id_are_counted_and_their_steps_marked(export, tmp_path):
    path = edited(
        export,
        tmp_path,
        *without_constraints(KERNEL),
        f"UPDATE {KERNEL} SET correlationId = NULL WHERE rowid % 4 = 0",
    )
    data = breakdown_json(path)
    found = record(data, "null_correlation", "kernels")
    assert found["count"] == count(
        path, f"SELECT count(*) FROM {KERNEL} WHERE correlationId IS NULL"
    )
    assert found["count"] <= data["trace"]["unlinked_ops"]
    verify = next(g for g in data["summary"]["groups"] if g["name"] == VERIFY)
    assert verify["integrity_steps"] == verify["rows"]  # every verify lost a quarter of its kernels


def test_correlation_ids_two_runtime_calls_share_are_counted(export, tmp_path):
    path = edited(
        export,
        tmp_path,
        f"CREATE TABLE twice AS SELECT * FROM {RUNTIME} WHERE rowid % 9 = 0",
        "UPDATE twice SET start = start + 1, end = end + 1",
        f"INSERT INTO {RUNTIME} SELECT * FROM twice",
    )
    found = record(breakdown_json(path), "duplicate_correlation", "api")
    assert found["count"] > 0 and "correlation" in found["example"]


def test_kernels_with_a_null_start_are_named_in_the_integrity_list(export, tmp_path):
    path = edited(
        export,
        tmp_path,
        *without_constraints(KERNEL),
        f"UPDATE {KERNEL} SET start = NULL WHERE rowid % 100 = 0",
    )
    trace = load_trace(path)
    (problem,) = [p for p in trace.integrity if p.kind == "null_time"]
    assert problem.table == "kernels" and "start NULL" in problem.example
    assert problem.count == count(path, f"SELECT count(*) FROM {KERNEL} WHERE start IS NULL")


# --- Kineto ---------------------------------------------------------------------------------------


def test_kineto_kernels_with_a_negative_dur_are_dropped_and_counted(tmp_path):
    """A negative dur once read as a zero-length kernel, silently."""
    path = kineto_copy(
        MI300X,
        tmp_path,
        lambda doc: [e.update(dur=-3.5) for e in first(doc["traceEvents"], "kernel", 4)],
    )
    data = breakdown_json(path, "--whole-trace")
    found = record(data, "negative_duration", "kernels")
    assert found["count"] == 4 and "dropped: negative dur" in found["message"]
    assert data["trace"]["kernels"] == len(load_trace(MI300X).kernels) - 4


def test_kineto_ranges_with_a_negative_dur_are_dropped_and_counted(tmp_path):
    path = kineto_copy(
        MI300X,
        tmp_path,
        lambda doc: first(doc["traceEvents"], "user_annotation", 1)[0].update(dur=-1),
    )
    (problem,) = load_trace(path).integrity
    assert (problem.kind, problem.table, problem.count) == ("negative_duration", "ranges", 1)


def test_kineto_kernels_without_a_dur_are_dropped_and_counted(tmp_path):
    path = kineto_copy(
        MI300X, tmp_path, lambda doc: [e.pop("dur") for e in first(doc["traceEvents"], "kernel", 2)]
    )
    (problem,) = load_trace(path).integrity
    assert (problem.kind, problem.count) == ("null_time", 2)


def test_kineto_kernels_outside_the_profiler_window_are_counted(tmp_path):
    def before_window(doc: dict) -> None:
        start = next(
            e["ts"] for e in doc["traceEvents"] if e.get("name", "").startswith("Iteration Start")
        )
        for event in first(doc["traceEvents"], "kernel", 2):
            event["ts"] = start - 1000.0

    found = record(
        breakdown_json(kineto_copy(A100, tmp_path, before_window), "--whole-trace"),
        "outside_capture",
        "kernels",
    )
    assert found["count"] == 2


def test_the_integrity_of_rank_files_is_summed_over_the_files(tmp_path):
    for rank in (0, 1):
        kineto_copy(
            TWO_RANKS / f"run-TP-{rank}.trace.json.gz",
            tmp_path / "ranks",
            lambda doc: [e.update(dur=-2) for e in first(doc["traceEvents"], "kernel", 3)],
            name=f"run-TP-{rank}.trace.json",
        )
    data = breakdown_json(tmp_path / "ranks", "--whole-trace", "--workers", "1")
    found = record(data, "negative_duration", "kernels")
    assert found["count"] == 6
    assert sum(found["message"] in w for w in data["trace"]["warnings"]) == 1


# --- the kernels command --------------------------------------------------------------------------


def test_the_kernels_command_names_the_problems_too(export, tmp_path):
    path = edited(
        export, tmp_path, f"INSERT INTO {KERNEL} SELECT * FROM {KERNEL} WHERE rowid % 50 = 0"
    )
    data = breakdown_json(path, command="kernels")
    found = record(data, "duplicate_rows", "kernels", block="")
    assert data["_stderr"].strip() == f"verifyprof: warning: {path}: {found['message']}"
    table = verifyprof("kernels", str(path))
    assert table.returncode == 0 and "exact copies of another row" in " ".join(table.stdout.split())


# --- whatif and compare say it too ----------------------------------------------------------------


@pytest.fixture(scope="module")
def doubled(export, tmp_path_factory) -> Path:
    """The H200 export with every 50th kernel row written twice."""
    return edited(
        export,
        tmp_path_factory.mktemp("doubled"),
        f"INSERT INTO {KERNEL} SELECT * FROM {KERNEL} WHERE rowid % 50 = 0",
    )


def test_whatif_names_the_problems_in_its_json_and_on_stderr(doubled):
    done = verifyprof("whatif", "--from", str(doubled), "--accept-len", "2", "--json")
    assert done.returncode == 0, done.stderr
    (found,) = json.loads(done.stdout)["integrity"]
    assert found["kind"] == "duplicate_rows" and found["table"] == "kernels"
    assert done.stderr.strip() == f"verifyprof: warning: {doubled}: {found['message']}"


def test_whatif_without_a_plan_still_names_the_problems_before_its_error(doubled):
    done = verifyprof("whatif", "--from", str(doubled))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 2, done.stderr
    assert "exact copies of another row" in lines[0] and "accept length unknown" in lines[1]


def test_a_clean_whatif_has_no_integrity_key(export):
    done = verifyprof("whatif", "--from", str(export), "--accept-len", "2", "--json")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "integrity" not in json.loads(done.stdout)


def test_compare_warns_for_the_side_whose_trace_has_the_problems(export, doubled):
    done = verifyprof("compare", str(export), str(doubled), "--json")
    assert done.returncode == 0, done.stderr
    warnings = json.loads(done.stdout)["warnings"]
    named = [w for w in warnings if "exact copies of another row" in w]
    assert len(named) == 1 and named[0].startswith(f"after {doubled}: "), warnings


# --- the steps a problem touches are marked in the steps JSON and CSV ----------------------------


def test_each_step_record_counts_the_problem_rows_inside_it(doubled):
    data = breakdown_json(doubled)
    marked = [s["integrity"] for s in data["steps"]]
    verify = data["summary"]["groups"][0]
    assert sum(n > 0 for n in marked) == verify["integrity_steps"] > 0
    assert all(list(s)[-1] == "integrity" for s in data["steps"])  # last, after the blocks


def test_a_clean_traces_step_records_carry_no_mark(clean):
    assert not any("integrity" in s for s in clean["steps"])


def test_the_csv_has_the_integrity_column_only_for_a_trace_with_problems(doubled, export, tmp_path):
    for path, out in ((doubled, tmp_path / "doubled.csv"), (export, tmp_path / "clean.csv")):
        assert verifyprof("breakdown", str(path), "--csv", str(out)).returncode == 0
    doubled_rows, clean_rows = (
        pd.read_csv(tmp_path / "doubled.csv"),
        pd.read_csv(tmp_path / "clean.csv"),
    )
    assert (doubled_rows["integrity"] > 0).any() and "integrity" not in clean_rows.columns


def test_the_marks_survive_a_breakdown_json_read_back(doubled, tmp_path):
    data = breakdown_json(doubled)
    frame = frame_from_json(data)
    assert [r["integrity"] for r in step_records(frame.steps)] == [
        s["integrity"] for s in data["steps"]
    ]


def test_marked_steps_encode_to_the_bytes_orjson_gives_their_records(doubled):
    rows = breakdown(load_trace(doubled)).steps
    assert rows["integrity"].any()
    assert steps_json(rows) == orjson.dumps(step_records(rows), option=ORJSON_OPTIONS)[1:-1]


# --- ranges written twice ------------------------------------------------------------------------


def test_nvtx_ranges_written_twice_are_dropped_once_and_the_steps_are_the_clean_ones(
    export, clean, tmp_path
):
    """A twin range nests inside its twin: left in, each doubled verify would be two steps, one
    holding every kernel and one reading '0 kernels, 100% host_wait'."""
    path = edited(
        export,
        tmp_path,
        "INSERT INTO NVTX_EVENTS SELECT * FROM NVTX_EVENTS WHERE rowid % 3 = 0 AND textId IN"
        " (SELECT id FROM StringIds WHERE value LIKE 'verifyprof.verify%')",
    )
    data = breakdown_json(path)
    found = record(data, "duplicate_rows", "ranges")
    assert found["count"] > 0 and found["message"] in data["_stderr"]

    def plain(steps: list[dict]) -> list[dict]:
        return [{k: v for k, v in s.items() if k != "integrity"} for s in steps]

    assert plain(data["steps"]) == plain(clean["steps"])


def test_kineto_annotations_written_twice_are_dropped_once(tmp_path):
    doc = json.loads(gzip.open(A100).read())
    events = doc["traceEvents"]
    steps = [e for e in events if e.get("name", "").startswith("ProfilerStep#")]
    assert len(steps) == 3  # every step annotation written twice, one of them also a third time
    path = tmp_path / "twice.json"
    path.write_text(json.dumps({**doc, "traceEvents": events + steps + steps[:1]}))
    data = breakdown_json(path, "--range", "ProfilerStep")
    assert record(data, "duplicate_rows", "ranges")["count"] == 4
    shutil.copyfile(A100, tmp_path / "clean.json.gz")
    clean = breakdown_json(tmp_path / "clean.json.gz", "--range", "ProfilerStep")
    assert [s["wall_ns"] for s in data["steps"]] == [s["wall_ns"] for s in clean["steps"]]
