"""``capture --again CAPTURE``: a capture's own recorded command run again with what the user
changes (issue 42's one screen: the command that would measure a load is one line, not the whole
capture command twice). On real processes: a Python program that prints its arguments, captured
with ``--batches`` and its own batch option, then captured again at other batches."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import forked_cli
import pytest
from capture_helpers import read_manifest, run_capture, tagged_env
from cli_helpers import verifyprof

from verifyprof.capture.load_axes import capture_folders
from verifyprof.contracts.capture_again import number_word

PROGRAM = ["python", "-c", "import sys; print(sys.argv)"]
RESULT = ("--result", "tokens_per_s=tok/s ([0-9.]+)")


def _first(tmp_path, tag):
    out = tmp_path / "first"
    args = ["--backend", "none", "--batches", "1,8", *RESULT, "--out", str(out)]
    proc = run_capture([*args, "--", *PROGRAM, "--batches", "{batch}", "--ks", "4"], tag)
    assert proc.returncode == 0, proc.stderr
    return out


def test_again_runs_the_recorded_program_at_the_batches_given(tmp_path, tag):
    first = _first(tmp_path, tag)
    again = tmp_path / "again"
    proc = run_capture(["--again", str(first), "--batches", "16,32", "--out", str(again)], tag)
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in capture_folders(again)] == ["batch-16", "batch-32"]
    doc = read_manifest(again / "batch-32")
    assert doc["command"]["target"][-4:] == ["--batches", "32", "--ks", "4"]
    assert doc["load"]["axes"]["batch"]["value"] == 32


def test_again_keeps_the_recorded_options_and_records_the_whole_command(tmp_path, tag):
    first = _first(tmp_path, tag)
    again = tmp_path / "again"
    proc = run_capture(["--again", str(first / "batch-8"), "--out", str(again)], tag)
    assert proc.returncode == 0, proc.stderr
    doc = read_manifest(again / "batch-8")  # swept at its own batch: its load recorded again
    argv = doc["command"]["verifyprof"]
    assert "--again" not in argv
    assert argv[argv.index("--result") + 1] == RESULT[1]  # the recorded option, carried over
    assert argv[argv.index("--out") + 1] == str(again)  # the user's, never the recorded one
    assert doc["command"]["target"][-4:] == ["--batches", "8", "--ks", "4"]
    assert doc["load"]["axes"]["batch"]["value"] == 8


def test_a_capture_made_again_can_be_made_again_at_other_batches(tmp_path, tag):
    first = _first(tmp_path, tag)
    again, third = tmp_path / "again", tmp_path / "third"
    assert run_capture(["--again", str(first), "--out", str(again)], tag).returncode == 0
    proc = run_capture(["--again", str(again), "--batches", "4", "--out", str(third)], tag)
    assert proc.returncode == 0, proc.stderr
    assert read_manifest(third / "batch-4")["command"]["target"][-4:] == [
        "--batches",
        "4",
        "--ks",
        "4",
    ]


def test_again_on_a_batches_folder_repeats_its_smallest_load(tmp_path, tag):
    out = tmp_path / "first"
    args = ["--backend", "none", "--batches", "2,16", "--out", str(out)]
    assert run_capture([*args, "--", *PROGRAM, "--bs", "{batch}"], tag).returncode == 0
    again = tmp_path / "again"  # batch-16 sorts before batch-2 by name; 2 is the smaller load
    assert run_capture(["--again", str(out), "--out", str(again)], tag).returncode == 0
    assert [p.name for p in capture_folders(again)] == ["batch-2"]


def test_an_option_given_again_replaces_the_recorded_one(tmp_path, tag):
    first = _first(tmp_path, tag)
    again = tmp_path / "again"
    other = ("--result", "tokens_per_s=rate ([0-9.]+)")
    proc = run_capture(["--again", str(first), *other, "--out", str(again)], tag)
    assert proc.returncode == 0, proc.stderr
    argv = read_manifest(again / "batch-1")["command"]["verifyprof"]
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--result"] == [other[1]]


@pytest.mark.parametrize(
    "args, said",
    [
        (["--again", "A", "--again", "B"], "given 2 times"),
        (["--again="], "needs a capture folder"),
        (["--again", "FIRST", "python", "other.py"], "goes after --"),
    ],
    ids=["twice", "empty", "program-without-dashes"],
)
def test_again_refuses_what_it_cannot_take_in_one_line(tmp_path, tag, args, said):
    first = _first(tmp_path, tag)
    args = [str(first) if a == "FIRST" else a for a in args]
    ran = verifyprof("capture", *args, "--out", str(tmp_path / "x"))
    assert ran.returncode == 2 and ran.stderr.count("\n") == 1
    assert said in ran.stderr
    assert not (tmp_path / "x").exists()


def test_a_load_value_is_written_as_capture_writes_it():
    assert number_word(1048576.0) == "1048576" and number_word(0.5) == "0.5"


def test_again_on_a_folder_with_no_capture_is_one_line_and_exit_2(tmp_path):
    ran = verifyprof("capture", "--again", str(tmp_path), "--out", str(tmp_path / "x"))
    assert ran.returncode == 2
    assert ran.stderr.count("\n") == 1 and str(tmp_path) in ran.stderr
    assert "no capture manifest" in ran.stderr


def test_again_with_a_placeholder_the_capture_never_filled_asks_for_its_sweep(tmp_path):
    folder = tmp_path / "cap"
    folder.mkdir()
    argv = ["verifyprof", "capture", "--contexts", "512", "--out", "x", "--", "p", "{context}"]
    (folder / "manifest.json").write_text(json.dumps({"command": {"verifyprof": argv}}))
    ran = verifyprof("capture", "--again", str(folder), "--out", str(tmp_path / "y"))
    assert ran.returncode == 2
    assert "{context}" in ran.stderr and "give --contexts" in ran.stderr


def test_whatif_names_the_measuring_capture_as_capture_again(tmp_path):
    """On B6's real captures (an H100, gpt-fast's batched fork captured with --batches): the
    command that would measure the load curve's unmeasured rows is ``capture --again``."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    b6 = root / "bench/results/external_h100_b6/captures-b"
    ran = verifyprof("whatif", str(b6), "--model", str(root / "bench/models/gptfast-7b.toml"))
    assert ran.returncode == 0, ran.stderr
    commands = [ln.strip() for ln in ran.stdout.splitlines() if "verifyprof capture" in ln]
    assert commands and all(
        shlex.split(c)[:4] == ["verifyprof", "capture", "--again", str(b6 / "batch-1")]
        for c in commands
    )


def test_the_printed_again_command_always_says_the_context_its_template_takes():
    """A capture swept at --contexts 512,2048: the row at 2048 was measured, so the context
    needs no saying in the whole command, but --again would fill {context} with the smallest
    capture's 512: the command names it."""
    from verifyprof.model.decision.measure_commands import capture_command

    template = (
        "--backend",
        "none",
        "--",
        "python",
        "p.py",
        "--bs",
        "{batch}",
        "--ctx",
        "{context}",
    )
    said = capture_command(template, "1,8", 2048.0, False, "DIR0")
    assert said == "verifyprof capture --again DIR0 --batches 1,8 --contexts 2048 --out DIR"


def _elsewhere(tmp_path, tag, *program: str):
    """A capture run in ``home``, where its program's files are."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "prog.py").write_text("import sys; print(sys.argv)\n")
    (home / "p.jsonl").write_text("{}\n")
    out = tmp_path / "first"
    args = ["--backend", "none", "--out", str(out), "--", "python", *program]
    first = forked_cli.run(
        ["capture", *args], env=tagged_env(tag), cwd=home, text=True, timeout=120
    )
    assert first.returncode == 0, first.stderr
    return home.resolve(), out


def test_again_from_another_directory_names_the_one_the_program_ran_in(tmp_path, tag):
    home, out = _elsewhere(tmp_path, tag, "prog.py", "--n", "1")
    assert Path(read_manifest(out)["command"]["cwd"]).resolve() == home
    again = run_capture(["--again", str(out), "--out", str(tmp_path / "again")], tag)
    assert again.returncode == 2
    (line,) = again.stderr.strip().splitlines()
    assert f"prog.py names a file in {home}, where the capture ran its program" in line
    assert f"(cd {home})" in line
    assert not (tmp_path / "again").exists()


def test_again_names_an_input_given_as_option_equals_path(tmp_path, tag):
    _, out = _elsewhere(tmp_path, tag, "-c", "print(1)", "--prompts=p.jsonl")
    again = run_capture(["--again", str(out), "--out", str(tmp_path / "again")], tag)
    assert again.returncode == 2
    assert "p.jsonl names a file in" in again.stderr


def test_again_from_another_directory_runs_a_program_given_after_the_separator(tmp_path, tag):
    _, out = _elsewhere(tmp_path, tag, "prog.py")
    given = ["--again", str(out), "--out", str(tmp_path / "again"), "--", *PROGRAM]
    assert run_capture(given, tag).returncode == 0
