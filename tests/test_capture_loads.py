"""Several loads from one command (issue 32 item 3): a program captured once per batch size
(``--batches`` with ``{batch}`` in its command) and a server driven at several concurrencies in
one trace (``--concurrency 1,2``), on real processes: a Python program and the fake SGLang
server."""

from __future__ import annotations

import json

from capture_helpers import assert_nothing_left, free_port, read_manifest, run_capture
from test_capture_cli import untraced_capture_args

PROGRAM = (
    "import json, os, pathlib, sys; b = int(sys.argv[1]);"
    " pathlib.Path(os.environ['VERIFYPROF_CAPTURE_DIR'], 'results.json').write_text("
    "json.dumps({'batch': b, 'tokens_per_s': 10.0 * b}))"
)


def test_a_program_is_captured_once_per_batch_with_its_batch_in_the_command(tmp_path, tag):
    out = tmp_path / "sweep"
    args = ["--backend", "none", "--batches", "1,8", "--out", str(out)]
    proc = run_capture([*args, "--", "python", "-c", PROGRAM, "{batch}"], tag)
    assert proc.returncode == 0, proc.stderr
    for b in (1, 8):
        doc = read_manifest(out / f"batch-{b}")
        assert doc["status"] == "ok"
        assert doc["command"]["target"][-1] == str(b)
        assert doc["results"]["batch"] == b
    assert sorted(p.name for p in out.iterdir()) == ["batch-1", "batch-8"]
    assert_nothing_left(tag)


def test_batches_without_a_placeholder_are_refused_before_anything_starts(tmp_path, tag):
    out = tmp_path / "sweep"
    args = ["--backend", "none", "--batches", "1,8", "--out", str(out)]
    proc = run_capture([*args, "--", "python", "-c", PROGRAM, "1"], tag)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert "{batch}" in line and not out.exists()


def test_batches_given_twice_or_below_one_are_refused(tmp_path, tag):
    for value in ("1,1", "0,8", "a"):
        args = ["--backend", "none", "--batches", value, "--out", str(tmp_path / "x")]
        proc = run_capture([*args, "--", "python", "-c", PROGRAM, "{batch}"], tag)
        assert proc.returncode == 2 and "--batches" in proc.stderr, value


def test_a_server_is_driven_at_each_concurrency_in_one_window(tmp_path, tag):
    out = tmp_path / "cap"
    args = untraced_capture_args(out, free_port(), requests=4, concurrency=1)
    args[args.index("--concurrency") + 1] = "1,2"
    proc = run_capture(args, tag)
    assert proc.returncode == 0, proc.stderr
    doc = read_manifest(out)
    loads = doc["loads"]
    assert [x["concurrency"] for x in loads] == [1, 2]
    assert all(x["requests_ok"] == 4 for x in loads)
    assert loads[0]["end_unix_ns"] <= loads[1]["start_unix_ns"]
    requests = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    assert len(requests) == 8
    assert_nothing_left(tag)


def test_one_concurrency_keeps_the_manifest_as_it_was(tmp_path, tag):
    out = tmp_path / "cap"
    proc = run_capture(untraced_capture_args(out, free_port(), requests=3, concurrency=2), tag)
    assert proc.returncode == 0, proc.stderr
    assert "loads" not in read_manifest(out)


DECODE = (
    "import json, os, pathlib, sys; b = int(sys.argv[1]);"
    " pathlib.Path(os.environ['VERIFYPROF_CAPTURE_DIR'], 'results.json').write_text("
    "json.dumps({'tokens_per_s': 50.0 * b, 'tokens_per_s_per_request': 50.0}))"
)


def test_the_plain_decoding_run_of_each_batch_records_one_requests_rate(tmp_path, tag):
    out = tmp_path / "sweep"
    decode = f'python -c "{DECODE}" {{batch}}'
    args = ["--backend", "none", "--batches", "1,8", "--decode-cmd", decode, "--out", str(out)]
    proc = run_capture([*args, "--", "python", "-c", PROGRAM, "{batch}"], tag)
    assert proc.returncode == 0, proc.stderr
    for b in (1, 8):  # batch 8 reports 400 tok/s over its rows: the plain step is one row's 50
        assert read_manifest(out / f"batch-{b}")["results"]["baseline_tokens_per_s"] == 50.0
    assert_nothing_left(tag)
