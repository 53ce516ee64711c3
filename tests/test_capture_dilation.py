"""The profiler's dilation (its slow-down of the program) measured where capture can: a program's
own unprofiled numbers, an unprofiled baseline run, a server's requests after the window; written
to the manifest and stated by whatif. Also accept lengths in either convention, converted and named.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from capture_helpers import (
    REPO,
    capture_program,
    fake_server_cmd,
    free_port,
    read_manifest,
    run_capture,
)


def program(tmp_path: Path, code: str) -> Path:
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent(code))
    return path


capture = capture_program  # the shape every test here runs


WRITES = """
import json, os, pathlib
pathlib.Path(os.environ["VERIFYPROF_CAPTURE_DIR"], "results.json").write_text(json.dumps({results}))
"""


def test_a_programs_own_unprofiled_rate_gives_the_dilation(tmp_path, tag):
    script = program(
        tmp_path, WRITES.format(results={"tokens_per_s": 80.0, "unprofiled_tokens_per_s": 120.0})
    )
    out = tmp_path / "cap"
    proc = capture(out, script, tag=tag)
    assert proc.returncode == 0, proc.stderr
    dilation = read_manifest(out)["dilation"]
    assert dilation["factor"] == pytest.approx(1.5) and dilation["source"] == "program results"
    assert (
        "profiler dilation: 1.50x (unprofiled 120.0 tok/s, profiled 80.0 tok/s; program results)"
        in proc.stdout
    )


TIMED = """
import json, os, pathlib, time
t0 = time.perf_counter()
total = sum(i * i for i in range(300_000))  # the program's own work, timed by itself
seconds = time.perf_counter() - t0
pathlib.Path(os.environ["VERIFYPROF_CAPTURE_DIR"], "results.json").write_text(json.dumps({
    "tokens_per_s": 1000 / seconds, "hooked": "VERIFYPROF_HOOKS" in os.environ}))
"""


def test_a_baseline_run_without_profiler_or_hooks_gives_the_dilation(tmp_path, tag):
    script = program(tmp_path, TIMED)
    out = tmp_path / "cap"
    proc = capture(
        out,
        script,
        "--baseline-run",
        "--hook",
        "json:dumps=verify",
        "--allow-missing-hooks",
        tag=tag,
    )
    assert proc.returncode == 0, proc.stderr
    baseline = json.loads((out / "baseline" / "results.json").read_text())
    profiled = json.loads((out / "results.json").read_text())
    assert baseline["hooked"] is False and profiled["hooked"] is True
    dilation = read_manifest(out)["dilation"]
    assert dilation["source"] == "baseline run" and dilation["baseline_wall_s"] > 0
    assert dilation["factor"] == pytest.approx(baseline["tokens_per_s"] / profiled["tokens_per_s"])
    assert (out / "baseline" / "program.log").exists()


def test_a_failing_baseline_run_fails_the_capture_before_the_profiled_run(tmp_path, tag):
    script = program(tmp_path, "import sys; sys.exit(4)\n")
    out = tmp_path / "cap"
    proc = capture(out, script, "--baseline-run", tag=tag)
    assert proc.returncode == 1 and "baseline run exited with code 4" in proc.stderr
    assert not (out / "program.log").exists()


def test_a_server_capture_measures_requests_after_the_window(tmp_path, tag):
    out = tmp_path / "cap"
    args = [
        "--server-cmd",
        fake_server_cmd(),
        "--port",
        str(free_port()),
        "--backend",
        "torch",
        "--hooks",
        "none",
        "--out",
        str(out),
        "--requests",
        "6",
        "--concurrency",
        "2",
        "--output-len",
        "20",
        "--warmup",
        "1",
    ]
    proc = run_capture(args, tag)
    assert proc.returncode == 0, proc.stderr
    doc = read_manifest(out)
    dilation = doc["dilation"]
    assert (
        dilation["source"] == "requests after the window" and dilation["requests_ok"] == 4
    )  # max(4, 2), <= 6
    assert dilation["basis"] == "tokens_per_s_per_request"
    assert dilation["profiled_tokens_per_s"] == doc["results"]["tokens_per_s_per_request"]
    assert dilation["factor"] == pytest.approx(
        dilation["unprofiled_tokens_per_s"] / dilation["profiled_tokens_per_s"]
    )
    assert "profiler dilation:" in proc.stdout


WORKLOAD = REPO / "traces" / "workload-dense-eager"


def test_whatif_states_the_unprofiled_rate_when_the_manifest_has_the_dilation(tmp_path):
    manifest = json.loads((WORKLOAD / "manifest.json").read_text())
    manifest["dilation"] = {
        "factor": 1.57,
        "basis": "tokens_per_s",
        "profiled_tokens_per_s": 40.0,
        "unprofiled_tokens_per_s": 62.8,
        "source": "baseline run",
    }
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "verifyprof.cli",
            "whatif",
            "--from",
            str(WORKLOAD / "trace.sqlite.gz"),
            "--manifest",
            str(path),
            "--model",
            "workload",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    current = json.loads(done.stdout)["current"]
    assert current["unprofiled_tokens_per_s"] == 62.8 and current["dilation"] == 1.57
    assert any(
        "slowed the program 1.57x (baseline run): it runs at 62.8 tok/s unprofiled" in n
        for n in current["notes"]
    )


@pytest.mark.parametrize(
    ("flags", "results", "reported_as"),
    [
        (("--accept-len-convention", "accepted_drafts"), {"accept_len": 1.25}, "accepted_drafts"),
        ((), {"accept_len": 1.25, "accept_len_convention": "accepted_drafts"}, "accepted_drafts"),
        ((), {"accepted_drafts_per_verify": 1.25}, "accepted_drafts"),
    ],
)
def test_an_accept_length_in_accepted_drafts_is_converted_and_named(
    tmp_path, tag, flags, results, reported_as
):
    out = tmp_path / "cap"
    proc = capture(out, program(tmp_path, WRITES.format(results=results)), *flags, tag=tag)
    assert proc.returncode == 0, proc.stderr
    res = read_manifest(out)["results"]
    assert res["accept_len"] == 2.25 and res["accept_len_convention"] == "tokens_per_verify"
    assert (res["accept_len_reported"], res["accept_len_reported_convention"]) == (
        1.25,
        reported_as,
    )
    assert (
        "accept length: 2.250 tokens/verify (bonus token included; the program reported 1.250"
        " accepted drafts/verify, +1)" in proc.stdout
    )


def test_an_accept_length_without_a_convention_is_read_as_tokens_per_verify_and_says_so(
    tmp_path, tag
):
    out = tmp_path / "cap"
    proc = capture(out, program(tmp_path, WRITES.format(results={"accept_len": 2.25})), tag=tag)
    assert proc.returncode == 0, proc.stderr
    res = read_manifest(out)["results"]
    assert res["accept_len"] == 2.25 and res["accept_len_convention_assumed"] is True
    assert "--accept-len-convention accepted_drafts" in proc.stdout


def test_an_unknown_accept_length_convention_is_refused_before_anything_starts(tmp_path, tag):
    out = tmp_path / "cap"
    proc = capture(out, program(tmp_path, "pass\n"), "--accept-len-convention", "bonus", tag=tag)
    assert (
        proc.returncode == 2
        and "--accept-len-convention must be one of" in proc.stderr
        and not out.exists()
    )


COUNTED = """
import json, os, pathlib
counter = pathlib.Path(os.environ["COUNTER"])
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
rates = [100.0, 300.0, 200.0, 50.0]  # three baseline runs, then the profiled one
pathlib.Path(os.environ["VERIFYPROF_CAPTURE_DIR"], "results.json").write_text(
    json.dumps({"tokens_per_s": rates[n]}))
"""


def test_repeated_baseline_runs_anchor_the_dilation_on_their_median(tmp_path, tag, monkeypatch):
    monkeypatch.setenv("COUNTER", str(tmp_path / "counter"))
    script = program(tmp_path, COUNTED)
    out = tmp_path / "cap"
    proc = capture(out, script, "--baseline-run", "--baseline-repeat", "3", tag=tag)
    assert proc.returncode == 0, proc.stderr
    dilation = read_manifest(out)["dilation"]
    assert dilation["baseline_runs_tokens_per_s"] == [100.0, 300.0, 200.0]
    assert dilation["unprofiled_tokens_per_s"] == 200.0 and dilation["factor"] == 4.0
    assert [json.loads((out / "baseline" / f"run-{i}" / "results.json").read_text())[
        "tokens_per_s"] for i in (1, 2, 3)] == [100.0, 300.0, 200.0]  # fmt: skip
    assert "the median of 3: 100.0, 300.0, 200.0 tok/s, spread 100%" in " ".join(
        proc.stdout.split()
    )


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        (["--baseline-run", "--baseline-repeat", "0"], "--baseline-repeat must be 1 to 20, got 0"),
        (["--baseline-repeat", "3"], "--baseline-repeat repeats --baseline-run: give both"),
    ],
)
def test_a_baseline_repeat_out_of_range_or_alone_is_refused(tmp_path, tag, flags, problem):
    script = program(tmp_path, "print('never runs')\n")
    proc = capture(tmp_path / "cap", script, *flags, tag=tag)
    assert proc.returncode == 2 and problem in proc.stderr, proc.stderr
    assert not (tmp_path / "cap").exists()


PLAIN_TOO = """
import json, os, pathlib
out = pathlib.Path(os.environ["VERIFYPROF_CAPTURE_DIR"])
unprofiled = out.name == "baseline"  # the baseline run writes into the capture's baseline/
pathlib.Path(out, "results.json").write_text(json.dumps({
    "tokens_per_s": 150.0 if unprofiled else 100.0,
    "baseline_tokens_per_s": 120.0 if unprofiled else 80.0}))
"""


def test_the_baseline_runs_own_plain_rate_is_recorded_beside_the_dilation(tmp_path, tag):
    """Speculating at the unprofiled rate races plain decoding at the unprofiled rate: the
    program's plain rate in the baseline run is kept (the profiled run's 80 is dilated too)."""
    from verifyprof.contracts.manifest import read_manifest as read_model_manifest

    out = tmp_path / "cap"
    proc = capture(out, program(tmp_path, PLAIN_TOO), "--baseline-run", tag=tag)
    assert proc.returncode == 0, proc.stderr
    dilation = read_manifest(out)["dilation"]
    assert dilation["factor"] == 1.5 and dilation["unprofiled_baseline_tokens_per_s"] == 120.0
    manifest = read_model_manifest(out / "manifest.json")
    assert manifest.unprofiled_baseline_tps == 120.0 and manifest.baseline_tps == 80.0
