"""Inputs as users have them, flags as they type them: capture folders, phase selection, one-line
errors. In-process (CliRunner) on the bundled real traces."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifyprof.capture.hooks import api as hook_api
from verifyprof.cli import app
from verifyprof.contracts import ranges

REPO = Path(__file__).resolve().parents[1]
FOLDER = REPO / "traces/workload-dense-eager"
HF = REPO / "traces/capture-hf-assisted"
MI300X = REPO / "tests/data/public/kineto/tracelens_mi300x_sglang_qwen3-8b_decode.json.gz"
NSYS_REP_HEAD = REPO / "tests/data/nsys_rep/capture-hf-assisted.head.nsys-rep"


def both_forms(tmp_path: Path) -> Path:
    """HF's capture folder with its export and (the head of) its .nsys-rep beside it."""
    folder = tmp_path / "capture-hf-assisted"
    folder.mkdir()
    for name in ("capture.sqlite.gz", "manifest.json"):
        (folder / name).symlink_to(HF / name)
    (folder / "capture.nsys-rep").write_bytes(NSYS_REP_HEAD.read_bytes())
    return folder


def cli(*argv: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    here = os.getcwd()
    os.chdir(REPO)
    try:
        return CliRunner().invoke(app, [str(a) for a in argv], env=env)
    finally:
        os.chdir(here)


def one_line_error(done) -> str:  # type: ignore[no-untyped-def]
    assert done.exit_code == 2, (done.exit_code, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("verifyprof: error: "), done.stderr
    assert not any(ch in done.stderr for ch in "╭│╰"), done.stderr  # no boxed panel
    return lines[0]


# --- item 3: a capture folder is an input ---------------------------------------------------------


def test_breakdown_reads_the_trace_of_a_capture_folder():
    done = cli("breakdown", f"{FOLDER}/", "--json")
    assert done.exit_code == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["trace"]["path"] == [str(FOLDER / "trace.sqlite.gz")]
    assert data["trace"]["kernels"] == 70722


def test_kernels_reads_the_trace_of_a_capture_folder():
    done = cli("kernels", FOLDER, "--json", "--top", "3", "--whole-trace")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["distinct_kernels"] == 39


def test_whatif_finds_the_capture_folders_manifest_and_says_so():
    folder = json.loads(cli("whatif", "--from", FOLDER, "--json").stdout)
    explicit = json.loads(
        cli(
            "whatif",
            "--from",
            FOLDER / "trace.sqlite.gz",
            "--manifest",
            FOLDER / "manifest.json",
            "--json",
        ).stdout
    )
    assert folder["current"]["accept_len"] == explicit["current"]["accept_len"] == 2.025
    assert any(
        "manifest.json found in the capture folder" in note for note in folder["current"]["notes"]
    )


def test_capture_folder_prefers_the_sqlite_export_over_the_nsys_report(tmp_path):
    folder = both_forms(tmp_path)  # capture.nsys-rep and capture.sqlite.gz: no nsys needed
    done = cli("breakdown", folder, "--json")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["trace"]["path"] == [str(folder / "capture.sqlite.gz")]


def test_nsys_report_without_nsys_names_the_sqlite_export_beside_it(tmp_path):
    env = {"PATH": str(tmp_path), "VERIFYPROF_NSYS": ""}
    if shutil.which("nsys", path=str(tmp_path)):
        pytest.skip("nsys found")
    folder = both_forms(tmp_path)
    line = one_line_error(cli("kernels", folder / "capture.nsys-rep", env=env))
    assert "needs Nsight Systems' nsys" in line and line.endswith(str(folder / "capture.sqlite.gz"))


def test_folder_without_a_trace_is_one_line(tmp_path):
    (tmp_path / "manifest.json").write_text("{}")
    line = one_line_error(cli("breakdown", tmp_path))
    assert line.startswith(f"verifyprof: error: {tmp_path}: folder holds no trace")


# --- item 4: steps by phase -----------------------------------------------------------------------


def test_phase_selects_verifyprof_sglang_and_user_ranges():
    assert ranges.phase_of("verifyprof.verify bs=1 tokens=4 graph=0") == "verify"
    assert ranges.phase_of("step[TARGET_VERIFY bs=4]") == "verify"
    assert ranges.phase_of("verify_eager step=0") == "verify"
    assert ranges.phase_of("verifyprof.draft_extend bs=1") == "draft_extend"
    assert ranges.phase_of("step[DRAFT_EXTEND bs=4]") == "draft_extend"
    assert ranges.phase_of("my_draft k=3") == "draft"
    assert ranges.phase_of("verifyprof.draft bs=1") == "draft"
    assert ranges.phase_of("step[DECODE bs=32]") == "decode"
    assert ranges.phase_of("aten::mm") is None and ranges.phase_of("acceptance") is None


def test_a_steps_name_is_its_text_minus_its_attributes():
    assert ranges.step_name("verify_eager step=0") == "verify_eager"
    assert ranges.step_name("step[TARGET_VERIFY bs=4]") == "step[TARGET_VERIFY]"
    assert ranges.step_name("verifyprof.verify bs=1 tokens=4") == "verifyprof.verify"


def test_step_picks_the_verify_group_and_keeps_every_other_step():
    """--step says which group is the verify; the draft and the rest of the cycle stay (issue 21:
    dropping them made draft time 0 and the verdict 9x too optimistic)."""
    data = json.loads(cli("breakdown", FOLDER, "--step", "verify", "--json").stdout)
    plain = json.loads(cli("breakdown", FOLDER, "--json").stdout)
    assert {s["name"] for s in data["steps"]} == {s["name"] for s in plain["steps"]}
    assert "verifyprof.draft" in {s["name"] for s in data["steps"]}
    text = " ".join(cli("breakdown", FOLDER, "--step", "verify").stdout.split())
    assert "verdict: verify 12.631 ms" in text and "95.0 tok/s" in text  # as without --step


def test_breakdown_step_draft_shows_the_draft_group_and_the_verify_verdict():
    """`breakdown --help` lists draft: --step draft leads with the draft steps' table; the
    verdict stays the verify's (whatif models the verify; the plan covers the whole cycle)."""
    done = cli("breakdown", FOLDER, "--step", "draft")
    assert done.exit_code == 0, done.stderr
    headline = next(line for line in done.stdout.splitlines() if " steps on devices " in line)
    assert headline.startswith("verifyprof.draft [")
    plain = " ".join(cli("breakdown", FOLDER).stdout.split())
    verdict = plain[plain.index("verdict: ") :]
    assert " ".join(done.stdout.split()).endswith(verdict)


def test_step_phase_on_sglang_spans():
    done = cli("breakdown", MI300X, "--step", "decode", "--json")
    assert done.exit_code == 0, done.stderr
    assert {s["name"] for s in json.loads(done.stdout)["steps"]} == {"step[DECODE]"}


def user_ranges_trace(tmp_path: Path) -> tuple[Path, int]:
    """The real hf-assisted capture with its verify ranges renamed as a user would name their own
    (``verify_eager step=N``): a real trace whose verify steps no built-in name matches."""
    import gzip
    import sqlite3

    path = tmp_path / "user-ranges.sqlite"
    path.write_bytes(gzip.decompress((HF / "capture.sqlite.gz").read_bytes()))
    db = sqlite3.connect(path)
    ids = [
        row[0]
        for row in db.execute(
            "SELECT id FROM StringIds WHERE value LIKE 'verifyprof.verify %' OR value ="
            " 'verifyprof.verify'"
        )
    ]
    for n, sid in enumerate(ids):
        db.execute("UPDATE StringIds SET value = ? WHERE id = ?", (f"verify_eager step={n}", sid))
    steps = db.execute(
        f"SELECT count(*) FROM NVTX_EVENTS WHERE textId IN ({','.join(map(str, ids))})"
    ).fetchone()[0]
    db.commit()
    db.close()
    return path, steps


def test_whatif_step_phase_models_a_users_own_verify_ranges(tmp_path):
    path, steps = user_ranges_trace(tmp_path)
    done = cli("whatif", "--from", path, "--step", "verify", "--accept-len", "2", "--json")
    assert done.exit_code == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["current"]["verify_steps"] == steps > 0
    assert any(
        "--step verify: modelling the" in n and "'verify_eager'" in n
        for n in data["current"]["notes"]
    )
    by_name = cli(
        "whatif",
        "--from",
        path,
        "--range",
        "^verify_eager|^verifyprof",
        "--step",
        "verify_eager",
        "--accept-len",
        "2",
        "--json",
    )
    assert by_name.exit_code == 0, by_name.stderr  # the name without its attributes
    assert json.loads(by_name.stdout)["current"]["verify_ms"] == data["current"]["verify_ms"]


def test_unknown_step_phase_is_an_error_naming_the_phases_and_steps():
    line = one_line_error(cli("breakdown", FOLDER, "--step", "verif"))
    assert "unknown step phase 'verif'" in line and "verifyprof.verify" in line


def test_step_with_a_range_picks_the_verify_among_the_ranges_the_range_selects():
    done = cli("breakdown", FOLDER, "--step", "verify", "--range", r"^verifyprof\.(verify|draft)\b")
    assert done.exit_code == 0, done.stderr
    assert "verdict: verify 12.631 ms" in " ".join(done.stdout.split())


# --- item 6: flags --------------------------------------------------------------------------------


def test_json_with_a_value_says_it_is_a_flag():
    line = one_line_error(cli("kernels", FOLDER, "--json", "true"))
    assert "--json is a flag" in line or "take no value" in line


def test_version():
    from importlib.metadata import version

    done = cli("--version")
    assert done.exit_code == 0 and done.stdout.strip() == f"verifyprof {version('verifyprof')}"


@pytest.mark.parametrize("top", ["0", "-5"])
def test_top_below_one_is_a_one_line_usage_error(top):
    assert "'--top'" in one_line_error(cli("kernels", FOLDER, "--top", top))


def test_bad_option_value_is_one_line():
    assert "'--batch'" in one_line_error(cli("whatif", "--batch", "abc"))


def test_breakdown_json_given_as_manifest_is_not_a_capture_manifest():
    line = one_line_error(cli("whatif", "--from", HF, "--manifest", HF / "breakdown.json"))
    assert f"{HF / 'breakdown.json'}: not a capture manifest" in line


def test_verify_ms_with_from_is_an_error_not_ignored():
    assert "--verify-ms is for the plain model" in one_line_error(
        cli("whatif", "--from", FOLDER, "--verify-ms", "3")
    )


def test_written_files_are_named_on_stderr(tmp_path):
    out = tmp_path / "steps.csv"
    done = cli("breakdown", FOLDER / "trace.sqlite.gz", "--csv", out, "--json")
    assert done.exit_code == 0 and out.is_file()
    assert f"wrote {out}" in done.stderr.splitlines()


def test_capture_summary_lines_are_single_lines(tmp_path):
    import sys

    from verifyprof.capture.flow import CaptureOptions, capture
    from verifyprof.capture.results import summary_lines

    result = capture(
        CaptureOptions(
            out=tmp_path / "cap", program=[sys.executable, "-c", "print(1)"], backend="none"
        )
    )
    lines = summary_lines(result)
    assert lines and all("\n" not in line for line in lines)
    assert lines[-1] == f"manifest: {result.manifest_path}"


# --- item 7: hooks without SGLang -----------------------------------------------------------------


def test_hooks_sglang_without_sglang_is_a_short_summary():
    import importlib.util

    if importlib.util.find_spec("sglang") is not None:
        pytest.skip("sglang installed")
    try:
        done = cli("hooks", "sglang")
    finally:
        hook_api.uninstall()  # the command leaves what it checked installed, as its process ends
    lines = done.stdout.strip().splitlines()
    assert len(" ".join(lines)) < 200, done.stdout
    assert "targets not checked: the package 'sglang' is not installed" in " ".join(lines)
    assert "ModuleNotFoundError" not in done.stdout


@pytest.mark.parametrize("phase", ["draft", "accept", "draft_extend", "spec_step"])
def test_whatif_refuses_to_model_another_part_of_the_cycle_as_the_verify(phase):
    """A draft modelled as the verify would be counted twice in the cycle it is part of."""
    message = one_line_error(cli("whatif", "--from", FOLDER, "--step", phase, "--accept-len", "2"))
    assert f"--step {phase}: whatif models the verify step" in message
