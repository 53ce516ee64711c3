"""JSON at Python's own limits (issue 44): a number of more digits than ``int()`` converts
(4,300) and nesting deeper than the recursion limit are one line naming the file, exit 2, in
every reader of a user's JSON: a manifest, a breakdown JSON, a --prompts file. Before, the
first was Python's ValueError and the second its RecursionError, each a 70-line traceback."""

from __future__ import annotations

import sys

import pytest
from capture_helpers import fake_server_cmd, free_port, run_capture
from cli_helpers import assert_one_line, verifyprof
from conftest import OWN_TRACES

CAPTURE = OWN_TRACES / "capture-hf-assisted"  # a real capture: its trace, manifest, breakdown

HUGE = "1" * (sys.get_int_max_str_digits() + 1)
DEEP = "[" * 100_000 + "]" * 100_000
VALUES = {"a huge number": HUGE, "deep nesting": DEEP}
PROBLEMS = {"a huge number": "holds a number of more than", "deep nesting": "is nested too deeply"}
TEXTS = {case: (f'{{"schema": {VALUES[case]}}}', PROBLEMS[case]) for case in VALUES}


def with_value(path, case: str) -> str:
    """The real JSON object of ``path`` with one more key, last, holding ``case``'s value."""
    text = path.read_text().rstrip()
    return text[:-1] + f', "x": {VALUES[case]}}}'  # after "schema": sniffed as before


@pytest.mark.parametrize("case", TEXTS)
def test_a_manifest_at_pythons_limits_is_one_line(tmp_path, case):
    text, problem = TEXTS[case]
    manifest = tmp_path / "manifest.json"
    manifest.write_text(text)
    proc = verifyprof("whatif", "--verify-ms", "15", "--manifest", str(manifest))
    assert_one_line(proc, str(manifest), f"manifest {problem}")


@pytest.mark.parametrize("case", VALUES)
def test_a_capture_folders_manifest_at_pythons_limits_is_one_line(tmp_path, case):
    """``whatif DIR`` on a --batches folder: each capture's manifest read (several captures)."""
    for name in ("batch-1", "batch-8"):
        folder = tmp_path / "caps" / name
        folder.mkdir(parents=True)
        (folder / "capture.sqlite.gz").symlink_to(CAPTURE / "capture.sqlite.gz")
        (folder / "manifest.json").write_text(with_value(CAPTURE / "manifest.json", case))
    proc = verifyprof("whatif", str(tmp_path / "caps"))
    assert_one_line(proc, "manifest.json", f"manifest {PROBLEMS[case]}")


@pytest.mark.parametrize("case", VALUES)
def test_a_breakdown_json_at_pythons_limits_is_one_line(tmp_path, case):
    breakdown = tmp_path / "breakdown.json"
    breakdown.write_text(with_value(CAPTURE / "breakdown.json", case))
    proc = verifyprof("whatif", "--from", str(breakdown), "--accept-len", "2")
    assert_one_line(proc, str(breakdown), f"breakdown JSON {PROBLEMS[case]}")


@pytest.mark.parametrize("case", TEXTS)
def test_a_prompts_file_at_pythons_limits_is_one_line_before_the_server_starts(tmp_path, tag, case):
    text, problem = TEXTS[case]
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "hello"}\n' + text.replace('"schema"', '"prompt"') + "\n")
    out = tmp_path / "cap"
    args = ["--server-cmd", fake_server_cmd(), "--port", str(free_port()), "--backend", "none"]
    proc = run_capture([*args, "--out", str(out), "--prompts", str(prompts)], tag)
    assert_one_line(proc, str(prompts), f"line 2 {problem}")
    assert not out.exists()
