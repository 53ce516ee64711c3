"""`verifyprof breakdown` and `verifyprof kernels` as a user runs them: the real entry (`cli.main`,
in-process), real traces. The console script as a real process: tests/test_cli_smoke.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
from cli_helpers import Ran, verifyprof
from conftest import OWN_TRACES, PUBLIC

from verifyprof.contracts import phases

BUNDLED = OWN_TRACES / "workload-dense-eager" / "trace.sqlite.gz"  # the README's first command


def run(*args: str) -> Ran:
    return verifyprof(*args)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_readme_command_breaks_down_the_bundled_trace():
    done = run("breakdown", str(BUNDLED))
    assert done.returncode == 0, done.stderr
    assert "verifyprof.verify [bs=1 tokens=4 graph=0]" in done.stdout
    assert "launch_gap" in done.stdout and "wall" in done.stdout


def test_json_output_follows_the_documented_schema_and_sums_to_wall():
    done = run("breakdown", str(BUNDLED), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["schema"] == "verifyprof.breakdown/1"
    assert set(data) >= {"trace", "options", "phases", "steps", "summary"}
    step = data["steps"][0]
    assert set(step) >= {
        "name",
        "rank",
        "device",
        "start_ns",
        "end_ns",
        "wall_ns",
        "gpu_span_ns",
        "kernels",
        "phases",
        "totals",
        "counts",
        "attrs",
        "mode",
    }
    assert all(
        sum(s["phases"].values()) == s["wall_ns"] == s["end_ns"] - s["start_ns"]
        for s in data["steps"]
    )
    names = {g["name"] for g in data["summary"]["groups"]}
    assert {
        "verifyprof.spec_step",
        "verifyprof.draft",
        "verifyprof.verify",
        "verifyprof.accept",
        "verifyprof.draft_extend",
        "verifyprof.decode",
    } <= names


def test_csv_and_parquet_hold_one_row_per_step_and_device(tmp_path):
    csv, parquet = tmp_path / "out" / "steps.csv", tmp_path / "steps.parquet"
    csv.parent.mkdir()  # output folders are never created (tests/test_outputs.py)
    done = run("breakdown", str(BUNDLED), "--csv", str(csv), "--parquet", str(parquet), "--json")
    assert done.returncode == 0, done.stderr
    n_steps = len(json.loads(done.stdout)["steps"])
    from_csv, from_parquet = pd.read_csv(csv), pd.read_parquet(parquet)
    assert len(from_csv) == len(from_parquet) == n_steps
    phase_columns = [f"{p}_ns" for p in phases.ALL]
    assert (from_parquet[phase_columns].sum(axis=1) == from_parquet["wall_ns"]).all()
    assert not list(tmp_path.glob("**/*.tmp"))  # written atomically: no temp files left


def test_input_trace_is_left_byte_identical():
    before = digest(BUNDLED), BUNDLED.stat().st_mtime_ns
    assert run("breakdown", str(BUNDLED), "--json").returncode == 0
    assert (digest(BUNDLED), BUNDLED.stat().st_mtime_ns) == before


def test_no_matching_range_is_one_line_listing_frequent_ranges_and_exit_2():
    done = run("breakdown", str(BUNDLED), "--range", "TARGET_VERIFY_NOT_HERE")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "trace.sqlite.gz" in lines[0] and "'verifyprof.verify' (" in lines[0]
    assert "Traceback" not in done.stderr


def test_invalid_range_regex_is_a_clear_error():
    done = run("breakdown", str(BUNDLED), "--range", "verify(")
    assert done.returncode == 2 and "not a valid regular expression" in done.stderr


def test_writing_over_a_directory_is_refused_without_touching_it(tmp_path):
    done = run("breakdown", str(BUNDLED), "--csv", str(tmp_path))
    assert done.returncode == 2 and "is a directory" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_user_taxonomy_replaces_the_builtin_rules(tmp_path):
    rules = tmp_path / "mine.toml"
    rules.write_text('[[rule]]\nphase = "attention"\npatterns = ["nvjet_"]\n')
    done = run("kernels", str(BUNDLED), "--taxonomy", str(rules), "--json", "--top", "200")
    assert done.returncode == 0, done.stderr
    kernels = json.loads(done.stdout)["kernels"]
    assert all(k["phase"] == "attention" for k in kernels if k["name"].startswith("nvjet_"))
    assert all(k["phase"] == "other" for k in kernels if not k["name"].startswith("nvjet_"))


def test_bad_taxonomy_file_names_the_file_and_rule(tmp_path):
    rules = tmp_path / "bad.toml"
    rules.write_text('[[rule]]\nphase = "warp_drive"\npatterns = ["x"]\n')
    done = run("breakdown", str(BUNDLED), "--taxonomy", str(rules))
    assert done.returncode == 2 and "bad.toml" in done.stderr and "warp_drive" in done.stderr


def test_kernels_lists_top_kernels_with_phase_and_share():
    done = run("kernels", str(BUNDLED), "--json", "--top", "5")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert len(data["kernels"]) == 5
    shares = [k["share"] for k in data["kernels"]]
    assert shares == sorted(shares, reverse=True) and 0 < sum(shares) <= 1
    assert sum(data["by_phase"].values()) == data["total_kernel_ns"]


def test_kernels_inside_ranges_only_counts_what_those_ranges_launched():
    everything = json.loads(run("kernels", str(BUNDLED), "--json", "--whole-trace").stdout)
    verify = json.loads(
        run("kernels", str(BUNDLED), "--json", "--range", r"^verifyprof\.verify").stdout
    )
    assert 0 < verify["total_kernel_ns"] < everything["total_kernel_ns"]


def test_kineto_rank_directory_loads_as_one_trace(tmp_path):
    source = PUBLIC / "kineto" / "tracelens_mi300x_sglang_qwen3-8b_decode.json.gz"
    (tmp_path / "1700000000.1-TP-0.trace.json.gz").write_bytes(source.read_bytes())
    done = run("breakdown", str(tmp_path), "--range", "DECODE", "--json")
    assert done.returncode == 0, done.stderr
    assert (
        json.loads(done.stdout)["steps"][0]["name"] == "step[DECODE]"
    )  # its text minus its attributes


def test_streamed_json_equals_the_in_memory_document():
    import io

    from verifyprof.attribution.breakdown import breakdown
    from verifyprof.report.files import stream_breakdown_json
    from verifyprof.trace import load_trace

    result = breakdown(load_trace(OWN_TRACES / "workload-moe-graph" / "trace.sqlite.gz"))
    sink = io.BytesIO()
    stream_breakdown_json(result, sink)
    assert json.loads(sink.getvalue()) == json.loads(json.dumps(result.to_json()))


def test_a_streamed_breakdown_of_many_batches_equals_the_in_memory_document_marks_included():
    """More steps than one written batch (8192), a step mark in the first batch only: every
    streamed record has the mark, as the in-memory document's records do."""
    import dataclasses
    import io

    import numpy as np
    import pandas as pd

    from verifyprof.attribution.breakdown import breakdown
    from verifyprof.report.files import STEP_BATCH, stream_breakdown_json
    from verifyprof.trace import load_trace

    result = breakdown(load_trace(OWN_TRACES / "workload-moe-graph" / "trace.sqlite.gz"))
    steps = pd.concat([result.steps] * (2 * STEP_BATCH // len(result.steps) + 1), ignore_index=True)
    steps["integrity"] = np.zeros(len(steps), np.int64)
    steps.loc[1, "integrity"] = 3
    result = dataclasses.replace(result, steps=steps)
    sink = io.BytesIO()
    stream_breakdown_json(result, sink)
    streamed = json.loads(sink.getvalue())
    assert len(streamed["steps"]) > 2 * STEP_BATCH
    assert streamed == json.loads(json.dumps(result.to_json()))
    assert all("integrity" in record for record in streamed["steps"])


FOLDER = OWN_TRACES / "workload-dense-eager"  # a capture folder: its manifest gives the plan


def kernels_json(*args: str) -> dict:
    done = run("kernels", str(BUNDLED), "--json", "--top", "40", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_kernels_lists_the_verdicts_step_group_as_the_report_does():
    """Issue 27: `kernels` mixed the width-sweep groups in (attention over 1152 calls) where the
    report's top kernels of the verdict's group had 640. By default, and with --step verify, it
    lists that group (named as the verdict names it), the report's list exactly."""
    from verifyprof import pipeline

    data = kernels_json()
    report = pipeline.report(BUNDLED, top_kernels=40)
    assert data["group"]["label"] == "{} [{}]".format(*report.group)
    assert data["group"]["mode"] == report.group_mode and data["step_count"] > 0
    assert data["group"]["why"] in data["scope"]
    assert data["kernels"] == report.kernels["kernels"]
    assert kernels_json("--step", "verify")["kernels"] == data["kernels"]
    every = kernels_json("--all")
    assert every["total_kernel_ns"] > data["total_kernel_ns"]  # the sweep groups are in there
    for row in data["kernels"]:
        assert row["calls_per_step"] == round(row["count"] / data["step_count"], 3)
        assert row["min_ns"] <= row["median_ns"] <= row["max_ns"]
        assert row["min_ns"] <= row["mean_ns"] <= row["max_ns"]


def test_kernels_of_the_draft_steps_and_one_scope_at_a_time():
    draft = kernels_json("--step", "draft")
    assert draft["group"]["name"] == "verifyprof.draft" and "draft steps' group" in draft["scope"]
    done = run("kernels", str(BUNDLED), "--all", "--whole-trace")
    assert done.returncode == 2 and "give one of --all, --whole-trace" in done.stderr


def test_breakdown_json_carries_the_verdict_whatif_json_gives():
    """The console prints a verdict under the tables; --json has the same one, rendered as
    whatif --json renders it (issue 27)."""
    data = json.loads(run("breakdown", str(FOLDER), "--json").stdout)
    modelled = json.loads(run("whatif", str(FOLDER), "--json").stdout)
    assert data["verdict_parts"] == modelled["verdict_parts"] is not None
    assert data["verdict"] == modelled["verdict"]
    text = " ".join(run("breakdown", str(FOLDER)).stdout.split())
    assert f"verdict: {data['verdict']}" in text


def test_kernels_of_sglang_steps_without_a_verify_list_the_first_group():
    """SGLang's `step[DECODE bs=32]`: the group is found as the breakdown names it (a regex on
    the range's text could not tell its name from its attributes)."""
    mi300x = PUBLIC / "kineto" / "tracelens_mi300x_sglang_qwen3-8b_decode.json.gz"
    done = run("kernels", str(mi300x), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    summary = json.loads(run("breakdown", str(mi300x), "--json").stdout)["summary"]
    first = summary["groups"][0]
    assert (data["group"]["name"], data["group"]["variant"]) == (first["name"], first["variant"])
    assert data["step_count"] == first["steps"] and data["total_kernel_ns"] > 0


def test_kernels_of_the_story_are_the_kernels_the_breakdown_counts_in_its_steps():
    """The group's steps in the story's mode, the same steps the breakdown's rows are: calls
    summed over every kernel equal the kernels of those rows (torch.compile'd trace: a graph
    group beside an eager one and a compile=1 configuration)."""
    from verifyprof.contracts.schema import variant

    trace = OWN_TRACES / "workload-dense-compile" / "trace.sqlite.gz"
    data = json.loads(run("kernels", str(trace), "--json", "--top", "1000").stdout)
    steps = json.loads(run("breakdown", str(trace), "--json").stdout)["steps"]
    group = data["group"]
    rows = [
        s
        for s in steps
        if (s["name"], variant(s["attrs"]), s["mode"])
        == (group["name"], group["variant"], group["mode"])
    ]
    assert len(rows) == data["step_count"] > 0
    assert sum(k["count"] for k in data["kernels"]) == sum(s["kernels"] for s in rows)
