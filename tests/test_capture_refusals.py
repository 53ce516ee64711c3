"""What a refused or stopped ``capture`` leaves (issue 44): a ``--batches`` run refused at the
first capture's own checks makes no ``--out`` (so the retry is not told the folder is taken), a
stopped one shows the batches it finished, and ``--out`` on a dangling symlink says so. Real
processes: the CLI and a Python program."""

from __future__ import annotations

import sys

from capture_helpers import assert_nothing_left, read_manifest, run_capture

# Fails at batch 8 (exit 3), after batch 1 went well.
PROGRAM = "import sys; sys.exit(3 if sys.argv[1] == '8' else 0)"


def test_a_batches_run_refused_for_a_missing_nsys_leaves_no_out_and_the_retry_says_the_same(
    tmp_path, tag
):
    """Before, --out was made before the first capture's checks: the refusal left it empty and
    the retry said '--out must be a new folder'."""
    out = tmp_path / "sweep"
    args = ["--batches", "1,8", "--out", str(out), "--", sys.executable, "-c", "pass", "{batch}"]
    missing = str(tmp_path / "no-nsys")
    first = run_capture(args, tag, VERIFYPROF_NSYS=missing)
    assert first.returncode == 2 and "is not an executable file" in first.stderr, first.stderr
    assert not out.exists()
    retry = run_capture(args, tag, VERIFYPROF_NSYS=missing)
    assert retry.stderr == first.stderr


def test_a_stopped_batches_run_shows_the_batches_it_finished(tmp_path, tag):
    """Before, the summaries were printed after the last batch only: a failure at batch 8
    printed nothing of batch 1."""
    out = tmp_path / "sweep"
    args = ["--backend", "none", "--batches", "1,8", "--out", str(out)]
    proc = run_capture([*args, "--", sys.executable, "-c", PROGRAM, "{batch}"], tag)
    assert proc.returncode == 1, proc.stderr
    assert str(out / "batch-1") in proc.stdout  # batch 1's summary
    stopped = f"verifyprof: stopped after 1 of 2 captures: batch-1 finished, kept in {out}"
    assert stopped in proc.stderr
    assert read_manifest(out / "batch-1")["status"] == "ok"
    assert read_manifest(out / "batch-8")["status"] == "failed"
    assert_nothing_left(tag)


def test_out_on_a_dangling_symlink_names_it(tmp_path, tag):
    """Before: mkdir's '[Errno 17] File exists', which it does not (as a folder)."""
    out = tmp_path / "cap"
    out.symlink_to(tmp_path / "gone")
    args = ["--backend", "none", "--out", str(out / "deeper"), "--", sys.executable, "-c", "pass"]
    proc = run_capture(args, tag)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert f"{out} is a symbolic link to {tmp_path / 'gone'}, which does not exist" in line
    assert out.is_symlink() and not (tmp_path / "gone").exists()


WRITES_RESULTS = (
    "import os, pathlib, sys;"
    " pathlib.Path(os.environ['VERIFYPROF_CAPTURE_DIR'], 'results.json').write_text(sys.argv[1])"
)


def test_a_results_json_the_program_wrote_that_cannot_be_read_fails_the_capture_naming_it(
    tmp_path, tag
):
    """Before, it was dropped without a word: the capture said ok, its manifest had no results,
    and whatif later said only that the accept length was unknown."""
    for text, problem in (
        ('{"accept_len": 2.1,', "results.json is not valid JSON: Expecting"),
        ("[2.1]", "results.json is not a JSON object"),
    ):
        out = tmp_path / f"cap-{len(text)}"
        args = ["--backend", "none", "--out", str(out), "--", sys.executable, "-c"]
        proc = run_capture([*args, WRITES_RESULTS, text], tag)
        assert proc.returncode == 1, proc.stderr
        assert f"{out / 'results.json'}: the program's {problem}" in proc.stderr, proc.stderr
        doc = read_manifest(out)
        assert doc["status"] == "failed" and problem in doc["error"]


def test_no_results_json_is_no_results_not_an_error(tmp_path, tag):
    out = tmp_path / "cap"
    proc = run_capture(
        ["--backend", "none", "--out", str(out), "--", sys.executable, "-c", "1"], tag
    )
    assert proc.returncode == 0, proc.stderr
    assert read_manifest(out)["status"] == "ok"
