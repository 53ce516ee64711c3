"""``verifyprof capture`` end to end: the real CLI as a subprocess, driving the real fake-SGLang
server process (HTTP front end + spawned scheduler child), with every failure mode for real.
Refusals before anything starts run the same entry (``cli.main``) in-process."""

from __future__ import annotations

import gzip
import json
import signal
import socket
import time

import pytest
from capture_helpers import (
    TAG,
    assert_nothing_left,
    fake_server_cmd,
    free_port,
    kill_tagged,
    new_tag,
    read_manifest,
    run_capture,
    signal_when_logged,
    start_capture,
    tagged_processes,
    wait_for_log,
)
from cli_helpers import verifyprof

from verifyprof.capture import nsys


def torch_capture_args(
    out, port, *server_flags, requests=6, concurrency=2, output_len=20, extra=()
):
    return [
        "--server-cmd",
        fake_server_cmd(*server_flags),
        "--port",
        str(port),
        "--backend",
        "torch",
        "--hooks",
        "none",
        "--out",
        str(out),
        "--requests",
        str(requests),
        "--concurrency",
        str(concurrency),
        "--output-len",
        str(output_len),
        "--warmup",
        "1",
        *extra,
    ]


def capture_in_process(args, tag, **env):
    """`verifyprof capture ARGS` through cli.main in this process, for refusals before anything
    starts (an interpreter start costs more than the check); the tag in its environment marks
    anything it would start, so assert_nothing_left still sees it."""
    return verifyprof("capture", *args, env={TAG: tag, **env})


def untraced_capture_args(out, port, *server_flags, **kwargs):
    """For tests of stopping and cleanup, where no trace is looked at: no profiler (--backend none)
    and no torch in the fake server, which saves the seconds torch and its profiler take to start.
    """
    args = torch_capture_args(out, port, *server_flags, "--no-torch", **kwargs)
    args[args.index("--backend") + 1] = "none"
    return args


# ---- the happy path ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def torch_capture(tmp_path_factory):
    """One torch-backend capture (6 requests, accept length 2.5) that the happy-path tests each
    read a part of: a capture costs seconds of CPU (torch and its profiler start in the server)."""
    value = new_tag()
    out = tmp_path_factory.mktemp("torch-capture") / "cap"
    try:
        proc = run_capture(torch_capture_args(out, free_port(), "--accept-len", "2.5"), value)
        assert_nothing_left(value)
        yield out, proc
    finally:
        kill_tagged(value)


def test_torch_backend_capture_writes_trace_and_manifest_with_server_metrics(torch_capture):
    out, proc = torch_capture  # the fixture checked that nothing it started is left running
    assert proc.returncode == 0, proc.stderr
    doc = read_manifest(out)
    assert doc["schema"] == "verifyprof.capture/1"
    assert doc["status"] == "ok" and doc["error"] is None
    results = doc["results"]
    # 20 tokens at 2.5 tokens per verify step: 8 steps per request, exactly what the fake reports.
    assert results["accept_len"] == pytest.approx(2.5)
    assert results["server_avg_spec_accept_length"] == pytest.approx(2.5)
    assert results["requests_ok"] == 6 and results["completion_tokens"] == 6 * 20
    assert results["spec_verify_ct"] == 6 * 8
    assert results["tokens_per_s"] > 0
    assert results["tokens_per_s"] == pytest.approx(
        results["completion_tokens"] / results["wall_s"]
    )
    assert doc["window"]["duration_ns"] > 0 and doc["window"]["start_reply"].startswith(
        "Start profiling"
    )
    assert doc["target"]["stopped_by"] == "SIGINT" and doc["target"]["leftover_pids"] == []


def test_torch_backend_trace_is_sglangs_real_profiler_output(torch_capture):
    out, proc = torch_capture
    assert proc.returncode == 0, proc.stderr
    traces = read_manifest(out)["traces"]
    assert [t["kind"] for t in traces] == ["kineto"]
    path = out / traces[0]["path"]
    assert path.parent.name == "torch" and path.name.endswith("-TP-0.trace.json.gz")
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    steps = [e["name"] for e in events if e.get("cat") == "user_annotation"]
    assert steps and all(name.startswith("step[TARGET_VERIFY bs=") for name in steps)


def test_per_request_meta_info_is_kept_beside_the_manifest(torch_capture):
    out, proc = torch_capture
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    assert sorted(r["index"] for r in rows) == [0, 1, 2, 3, 4, 5]
    assert all(
        r["ok"] and r["completion_tokens"] == 20 and r["spec"]["spec_verify_ct"] == 8 for r in rows
    )


def test_summary_printed_names_accept_length_throughput_and_manifest(torch_capture):
    out, proc = torch_capture
    assert proc.returncode == 0, proc.stderr
    assert "accept length: 2.500 tokens/verify" in proc.stdout
    assert "tok/s" in proc.stdout and str(out / "manifest.json") in proc.stdout


def hook_report_files(out):
    """What each process that installed the hooks reported (OUT/hooks/hooks-<pid>.json)."""
    return [json.loads(p.read_text()) for p in sorted((out / "hooks").glob("hooks-*.json"))]


def test_hooks_are_injected_into_the_servers_spawned_scheduler(tmp_path, tag):
    out = tmp_path / "cap"
    args = untraced_capture_args(
        out, free_port()
    )  # which processes hooked: no trace, no torch needed
    args[args.index("--hooks") + 1] = "none"
    proc = run_capture([*args, "--hook", "json:dumps=verify"], tag)
    assert proc.returncode == 0, proc.stderr
    reports = hook_report_files(out)
    # the HTTP front end and its multiprocessing-spawn scheduler child both installed the hook
    assert any("--multiprocessing-fork" in (r["argv"] or []) for r in reports), reports
    assert all([h["state"] for h in r["hooks"]] == ["patched"] for r in reports)
    # the manifest lists the processes that opened ranges (json.dumps replies), with their counts
    hooks = read_manifest(out)["hooks"]
    assert hooks["processes"] and all(
        p["calls"]["user hook json:dumps=verify"] >= 1 for p in hooks["processes"]
    )
    assert hooks["fired"]["user hook json:dumps=verify"] >= 6


def test_default_sglang_hooks_that_never_fire_fail_the_capture_with_exit_2(tmp_path, tag):
    out = tmp_path / "cap"
    args = torch_capture_args(out, free_port())
    del args[args.index("--hooks") : args.index("--hooks") + 2]
    proc = run_capture(args, tag)
    assert proc.returncode == 2, proc.stderr
    assert "no verifyprof range was recorded" in proc.stderr
    assert "sglang.toml hook 1 (spec_step): pending:" in proc.stderr
    assert_nothing_left(tag)


def test_default_sglang_hooks_reach_every_server_process_and_never_break_it(tmp_path, tag):
    out = tmp_path / "cap"
    args = torch_capture_args(out, free_port(), extra=("--allow-missing-hooks",))
    del args[args.index("--hooks") : args.index("--hooks") + 2]
    args[args.index("--backend") + 1] = "none"  # which processes hooked: no trace needed
    proc = run_capture(args, tag)
    assert proc.returncode == 0, proc.stderr
    hooks = read_manifest(out)["hooks"]
    assert hooks["presets"] == ["sglang"] and "VERIFYPROF_HOOKS" in hooks["env"]
    # no sglang in the fake: every target waits for a module that is never imported
    reports = hook_report_files(out)
    assert (
        len(reports) >= 2 and hooks["processes"] == [] and hooks["idle_processes"] == len(reports)
    )
    assert all({h["state"] for h in r["hooks"]} == {"pending"} for r in reports)
    assert {row["state"] for row in hooks["never_fired"]} == {"pending"}
    assert "never fired" in proc.stdout


def test_backend_none_measures_without_profiling(tmp_path, tag):
    out = tmp_path / "cap"
    args = untraced_capture_args(out, free_port())
    proc = run_capture(args, tag)
    assert proc.returncode == 0, proc.stderr
    doc = read_manifest(out)
    assert doc["traces"] == [] and doc["results"]["accept_len"] == pytest.approx(2.5)
    assert "/start_profile" not in (out / "server.log").read_text()


# ---- failures before anything starts ------------------------------------------------------------


def test_port_in_use_is_refused_before_the_server_starts(tmp_path, tag):
    out = tmp_path / "cap"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = capture_in_process(torch_capture_args(out, port), tag)
    assert proc.returncode == 2
    assert f"port {port} is already in use" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()
    assert_nothing_left(tag)


@pytest.mark.skipif(
    any(nsys.glob.glob(p) for p in nsys._SEARCH), reason="nsys installed in a standard place"
)
def test_missing_nsys_says_how_to_get_it_and_starts_nothing(tmp_path, tag):
    out = tmp_path / "cap"
    args = torch_capture_args(out, free_port())
    args[args.index("--backend") + 1] = "nsys"
    empty = tmp_path / "bin"
    empty.mkdir()
    proc = capture_in_process(args, tag, PATH=str(empty))
    assert proc.returncode == 2
    assert "nsys (Nsight Systems) not found" in proc.stderr
    assert "VERIFYPROF_NSYS" in proc.stderr and "--backend torch" in proc.stderr
    assert not out.exists()
    assert_nothing_left(tag)


def test_verifyprof_nsys_pointing_nowhere_is_named_in_the_error(tmp_path, tag):
    args = torch_capture_args(tmp_path / "cap", free_port())
    args[args.index("--backend") + 1] = "nsys"
    proc = capture_in_process(args, tag, VERIFYPROF_NSYS=str(tmp_path / "no-nsys"))
    assert proc.returncode == 2
    assert (
        f"{tmp_path / 'no-nsys'}: VERIFYPROF_NSYS is set but is not an executable file"
        in proc.stderr
    )


def test_non_empty_output_directory_is_never_overwritten(tmp_path, tag):
    out = tmp_path / "cap"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    proc = capture_in_process(torch_capture_args(out, free_port()), tag)
    assert proc.returncode == 2 and "not empty" in proc.stderr
    assert (out / "keep.txt").read_text() == "mine" and sorted(p.name for p in out.iterdir()) == [
        "keep.txt"
    ]


# ---- failures of a running server ----------------------------------------------------------------


def test_health_timeout_shows_the_server_log_tail_and_stops_the_server(tmp_path, tag):
    out = tmp_path / "cap"
    proc = run_capture(
        [
            *torch_capture_args(out, free_port(), "--never-healthy", "--no-torch"),
            "--health-timeout",
            "4",
        ],
        tag,
    )
    assert proc.returncode == 1
    assert "server not healthy after 4 s" in proc.stderr
    assert "Capturing batches" in proc.stderr  # a line of the server's own log
    assert "Traceback" not in proc.stderr
    doc = read_manifest(out)
    assert doc["status"] == "failed" and "not healthy" in doc["error"]
    assert_nothing_left(tag)


def test_server_crashing_at_start_reports_its_exit_code_and_log(tmp_path, tag):
    proc = run_capture(
        torch_capture_args(tmp_path / "cap", free_port(), "--exit-at-start", "3"), tag
    )
    assert proc.returncode == 1
    assert "server exited with code 3 before it became healthy" in proc.stderr
    assert "Tried to allocate 20.00 GiB (simulated)" in proc.stderr
    assert_nothing_left(tag)


def test_server_dying_mid_run_keeps_partial_results_and_kills_its_orphans(tmp_path, tag):
    out = tmp_path / "cap"
    args = torch_capture_args(
        out, free_port(), "--die-after-requests", "3", requests=10, concurrency=1
    )
    args[args.index("--warmup") + 1] = "0"
    proc = run_capture(args, tag)
    assert proc.returncode == 1
    assert "server exited with code 1 after 3/10 requests" in proc.stderr
    assert "simulated crash" in proc.stderr
    doc = read_manifest(out)
    assert doc["status"] == "failed"
    assert doc["workload"]["completed"] == 3 and doc["results"]["requests_ok"] == 3
    assert len((out / "requests.jsonl").read_text().splitlines()) == 3
    # the front end died with os._exit; its scheduler child was left orphaned and must be gone too
    assert_nothing_left(tag)


def test_orphans_are_found_without_psutil_too(tmp_path, tag):
    out = tmp_path / "cap"
    args = untraced_capture_args(
        out, free_port(), "--die-after-requests", "2", "--detached-child", requests=5, concurrency=1
    )
    args[args.index("--warmup") + 1] = "0"
    proc = run_capture(args, tag, VERIFYPROF_PROCTABLE="proc")
    assert proc.returncode == 1 and "after 2/5 requests" in proc.stderr, proc.stderr[:600]
    assert_nothing_left(tag)


def test_ctrl_c_mid_workload_stops_everything_and_keeps_partial_outputs(tmp_path, tag):
    out = tmp_path / "cap"
    args = torch_capture_args(
        out, free_port(), "--step-ms", "20", requests=200, concurrency=2, output_len=40
    )
    capture = start_capture(args, tag)

    def still_running() -> None:
        assert capture.poll() is None

    stderr = signal_when_logged(
        capture, out / "server.log", '"POST /generate', signal.SIGINT, count=6, before=still_running
    )
    assert capture.returncode == 130, stderr
    assert "interrupted" in stderr and str(out) in stderr
    doc = read_manifest(out)
    assert doc["status"] == "interrupted"
    assert 0 < doc["workload"]["completed"] < 200
    assert doc["results"]["requests_ok"] == doc["workload"]["completed"]
    assert doc["results"]["accept_len"] == pytest.approx(2.5)
    # the profile was stopped before the server, so what was captured was written
    assert [t["kind"] for t in doc["traces"]] == ["kineto"]
    assert doc["target"]["stopped_by"] == "SIGINT"
    assert_nothing_left(tag)


def test_ctrl_c_while_waiting_for_health_stops_the_starting_server(tmp_path, tag):
    out = tmp_path / "cap"
    capture = start_capture(
        torch_capture_args(out, free_port(), "--never-healthy", "--no-torch"), tag
    )
    signal_when_logged(capture, out / "server.log", "Capturing batches", signal.SIGINT)
    assert capture.returncode == 130
    assert read_manifest(out)["status"] == "interrupted"
    assert_nothing_left(tag)


def test_second_ctrl_c_escalates_instead_of_waiting_out_the_stop_timeout(tmp_path, tag):
    out = tmp_path / "cap"
    args = [
        *torch_capture_args(out, free_port(), "--deaf-sigint", "--step-ms", "20", requests=200),
        "--stop-timeout",
        "120",
    ]
    capture = start_capture(args, tag)
    try:
        wait_for_log(out / "server.log", '"POST /generate', count=3)
        capture.send_signal(signal.SIGINT)
        wait_for_log(out / "server.log", '"POST /stop_profile')  # cleanup has begun
        time.sleep(1.0)
        started = time.monotonic()
        capture.send_signal(signal.SIGINT)
        _, stderr = capture.communicate(timeout=60)
        took = time.monotonic() - started
    finally:
        if capture.poll() is None:
            capture.kill()
    assert capture.returncode == 130, stderr
    assert took < 30 and "stopping harder" in stderr
    assert read_manifest(out)["target"]["stopped_by"] in ("SIGTERM", "SIGKILL")
    assert_nothing_left(tag)


def test_bad_prompts_file_is_reported_before_the_server_starts(tmp_path, tag):
    bad = tmp_path / "prompts.jsonl"
    bad.write_text("not json\n")
    out = tmp_path / "cap"
    proc = capture_in_process([*torch_capture_args(out, free_port()), "--prompts", str(bad)], tag)
    assert proc.returncode == 2 and f"{bad}: line 1 is not JSON" in proc.stderr
    assert not out.exists()
    assert_nothing_left(tag)


def test_sigterm_to_verifyprof_cleans_up_like_ctrl_c(tmp_path, tag):
    out = tmp_path / "cap"
    capture = start_capture(
        torch_capture_args(out, free_port(), "--step-ms", "20", requests=200), tag
    )
    signal_when_logged(capture, out / "server.log", '"POST /generate', signal.SIGTERM, count=3)
    assert capture.returncode == 128 + signal.SIGTERM
    assert read_manifest(out)["error"] == "interrupted (SIGTERM)"
    assert_nothing_left(tag)


def test_server_leader_gets_sigterm_when_verifyprof_is_killed(tmp_path, tag):
    out = tmp_path / "cap"
    capture = start_capture(
        untraced_capture_args(out, free_port(), "--step-ms", "20", requests=200), tag
    )
    try:
        wait_for_log(out / "server.log", '"POST /generate', count=2)
        leader = next(
            p
            for p in tagged_processes(tag)
            if "fake_sglang_server.py" in " ".join(p.cmdline()) and p.ppid() == capture.pid
        )
        capture.kill()  # SIGKILL: no cleanup code of ours runs
        capture.wait(timeout=10)
        deadline = time.monotonic() + 10
        while (
            leader in tagged_processes(tag) and time.monotonic() < deadline
        ):  # zombies count as gone
            time.sleep(0.1)
        assert leader not in tagged_processes(tag), "the server outlived verifyprof's SIGKILL"
    finally:
        if capture.poll() is None:
            capture.kill()


def test_server_ignoring_sigint_is_escalated_to_sigterm(tmp_path, tag):
    out = tmp_path / "cap"
    args = [
        *untraced_capture_args(out, free_port(), "--ignore-sigint", requests=2),
        "--stop-timeout",
        "1",
    ]
    proc = run_capture(args, tag)
    assert proc.returncode == 0, proc.stderr
    assert read_manifest(out)["target"]["stopped_by"] == "SIGTERM"
    assert_nothing_left(tag)


# ---- offline programs ----------------------------------------------------------------------------


def test_program_exit_code_is_recorded_and_failure_reported(tmp_path, tag):
    out = tmp_path / "cap"
    script = "import sys; print('hello from the program'); sys.exit(3)"
    proc = run_capture(["--backend", "none", "--out", str(out), "--", "python", "-c", script], tag)
    assert proc.returncode == 1
    assert "program exited with code 3" in proc.stderr
    doc = read_manifest(out)
    assert (
        doc["mode"] == "program" and doc["status"] == "failed" and doc["target"]["exit_code"] == 3
    )
    assert "hello from the program" in (out / "program.log").read_text()


def test_program_gets_the_capture_directory_and_its_outputs_are_listed(tmp_path, tag):
    out = tmp_path / "cap"
    script = (
        "import os, pathlib; pathlib.Path(os.environ['VERIFYPROF_CAPTURE_DIR'],"
        " 'own.txt').write_text('x')"
    )
    proc = run_capture(["--backend", "none", "--out", str(out), "--", "python", "-c", script], tag)
    assert proc.returncode == 0, proc.stderr
    doc = read_manifest(out)
    assert doc["status"] == "ok" and doc["target"]["exit_code"] == 0 and "own.txt" in doc["files"]


def test_numbers_a_program_reports_in_results_json_become_the_manifests_results(tmp_path, tag):
    out = tmp_path / "cap"
    script = (
        "import json, os, pathlib; pathlib.Path(os.environ['VERIFYPROF_CAPTURE_DIR'],"
        " 'results.json').write_text(json.dumps({'accept_len': 2.25, 'tokens_per_s': 91.5}))"
    )
    proc = run_capture(["--backend", "none", "--out", str(out), "--", "python", "-c", script], tag)
    assert proc.returncode == 0, proc.stderr
    results = read_manifest(out)["results"]
    assert (results["accept_len"], results["tokens_per_s"]) == (2.25, 91.5)
    assert results["accept_len_convention"] == "tokens_per_verify"  # named, as reported (assumed)
    assert "accept length: 2.250 tokens/verify" in proc.stdout


def test_ctrl_c_stops_a_program_and_the_children_it_started(tmp_path, tag):
    out = tmp_path / "cap"
    script = (
        "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time;"
        " time.sleep(600)'], start_new_session=True); print('started', flush=True); time.sleep(600)"
    )
    capture = start_capture(
        ["--backend", "none", "--out", str(out), "--", "python", "-c", script], tag
    )

    def all_three_running() -> None:
        time.sleep(0.3)
        assert len(tagged_processes(tag)) >= 3  # verifyprof, the program, its detached child

    signal_when_logged(
        capture, out / "program.log", "started", signal.SIGINT, before=all_three_running
    )
    assert capture.returncode == 130
    assert read_manifest(out)["status"] == "interrupted"
    assert_nothing_left(tag)


def test_torch_backend_needs_a_server(tmp_path, tag):
    proc = capture_in_process(
        ["--backend", "torch", "--out", str(tmp_path / "cap"), "--", "python", "-c", "pass"], tag
    )
    assert proc.returncode == 2 and "--backend torch needs --server-cmd" in proc.stderr


def test_server_and_program_together_are_refused(tmp_path, tag):
    proc = capture_in_process(
        ["--server-cmd", "x", "--out", str(tmp_path / "cap"), "--", "python", "-c", "pass"], tag
    )
    assert proc.returncode == 2 and "either --server-cmd" in proc.stderr
