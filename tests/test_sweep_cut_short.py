"""A ``capture --batches`` folder whose last capture was cut short before it wrote a trace (B6 on
an H100: the device call's deadline stopped batch 64's profiled run; its manifest still says
"running", its folder holds no trace): ``whatif DIR`` and ``report DIR`` read the captures that
finished and say, in one warning, which one was left out and why. A capture named on its own is
still refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_helpers import verifyprof

ROOT = Path(__file__).resolve().parents[1]
B6 = ROOT / "bench" / "results" / "external_h100_b6" / "captures-b"
MODEL = ("--model", str(ROOT / "bench" / "models" / "gptfast-7b.toml"))
DECLARED = ("--capture-context", "56")  # the program states no context


@pytest.fixture
def cut_short(tmp_path: Path) -> Path:
    """The real sweep folder, as capture left it: batch 1 and 4 finished, batch 64 cut short."""
    out = tmp_path / "captures-b"
    for name in ("batch-1", "batch-4", "batch-64"):
        shutil.copytree(B6 / name, out / name)
    return out


def test_the_cut_short_capture_is_in_the_real_folder_as_capture_left_it():
    manifest = json.loads((B6 / "batch-64" / "manifest.json").read_text())
    assert manifest["status"] == "running"
    assert not [p for p in (B6 / "batch-64").iterdir() if p.is_file() and "capture." in p.name]


def test_whatif_reads_the_finished_captures_and_names_the_one_left_out(cut_short):
    ran = verifyprof("whatif", str(cut_short), *MODEL, *DECLARED, "--json")
    assert ran.returncode == 0, ran.stderr
    data = json.loads(ran.stdout)
    notes = " ".join(data["load_curve"]["notes"])
    assert "2 capture" in notes, notes  # batch 1 and 4, one model
    (left,) = data["unfinished_captures"]  # the JSON says what stderr warns of
    assert left["capture"].endswith("batch-64") and "left no trace" in left["why"]
    warned = [line for line in ran.stderr.splitlines() if "batch-64" in line]
    assert len(warned) == 1, ran.stderr
    assert "never finished" in warned[0] and "left no trace" in warned[0]


def test_report_reads_the_same_folder_and_its_page_names_the_one_left_out(cut_short):
    ran = verifyprof("report", str(cut_short), *MODEL, *DECLARED, "--json")
    assert ran.returncode == 0, ran.stderr
    notes = json.loads(ran.stdout)["notes"]
    assert any("2 captures" in n for n in notes), notes
    left = [n for n in notes if "batch-64" in n]
    assert len(left) == 1 and "left no trace" in left[0], notes
    warned = [line for line in ran.stderr.splitlines() if "batch-64" in line]
    assert len(warned) == 1 and "left no trace" in warned[0], ran.stderr


def test_a_cut_short_capture_named_on_its_own_is_refused_in_one_line(cut_short):
    ran = verifyprof("whatif", str(cut_short / "batch-64"), *MODEL, *DECLARED)
    assert ran.returncode == 2
    assert ran.stderr.count("\n") == 1 and "batch-64" in ran.stderr, ran.stderr
    assert "Traceback" not in ran.stderr


def test_a_folder_of_nothing_but_cut_short_captures_is_refused_naming_one(tmp_path):
    only = tmp_path / "captures-b"
    shutil.copytree(B6 / "batch-64", only / "batch-64")
    ran = verifyprof("whatif", str(only), *MODEL, *DECLARED)
    assert ran.returncode == 2
    assert "batch-64" in ran.stderr and "no trace" in ran.stderr, ran.stderr


def manifest_of(folder: Path, **fields) -> None:
    path = folder / "manifest.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | fields))


def test_the_warning_keeps_the_manifests_whole_error(cut_short):
    manifest_of(cut_short / "batch-64", status="failed", error="RuntimeError: nsys: deadline")
    ran = verifyprof("whatif", str(cut_short), *MODEL, *DECLARED)
    assert ran.returncode == 0, ran.stderr
    (warned,) = [line for line in ran.stderr.splitlines() if "batch-64" in line]
    assert "failed (RuntimeError: nsys: deadline), and it left no trace" in warned


def test_a_failed_capture_holding_several_traces_is_refused_not_left_out(cut_short):
    for name in ("r0.nsys-rep", "r1.nsys-rep"):
        (cut_short / "batch-64" / name).write_bytes(b"")
    ran = verifyprof("whatif", str(cut_short), *MODEL, *DECLARED)
    assert ran.returncode == 2
    assert "batch-64" in ran.stderr and "several nsys traces" in ran.stderr, ran.stderr


def test_a_cut_short_first_capture_says_which_is_today_now(cut_short):
    manifest_of(cut_short / "batch-1", status="running")
    (cut_short / "batch-1" / "breakdown.json.gz").unlink()
    ran = verifyprof("whatif", str(cut_short), *MODEL, *DECLARED)
    assert ran.returncode == 0, ran.stderr
    (warned,) = [line for line in ran.stderr.splitlines() if "batch-1:" in line]
    assert "today's capture is batch-4" in warned, ran.stderr


def test_whatif_on_the_folder_opens_each_captures_files_once(tmp_path):
    """The folder's expansion (which captures were cut short) looks for each capture's trace
    first and reads a manifest only where there is none; the CLI hands that expansion to the
    run: every manifest and breakdown opened once (each manifest was opened three times)."""
    from open_counts import counted_run

    kids = sorted(p for p in B6.iterdir() if p.is_dir())
    found = counted_run(kids, tmp_path / "counts.json", "whatif", str(B6), *MODEL, "--json")
    assert found["opened"] and set(found["opened"].values()) == {1}
    assert "batch-64/manifest.json" in found["opened"]  # the cut-short one: read to say why


def test_report_on_the_folder_opens_each_captures_files_once(tmp_path):
    """As whatif: the report's command hands its expansion of the folder to the run (it expanded
    the folder twice, once for its checks and once in the run)."""
    from open_counts import counted_run

    kids = sorted(p for p in B6.iterdir() if p.is_dir())
    found = counted_run(kids, tmp_path / "counts.json", "report", str(B6), *MODEL, "--json")
    assert found["opened"] and set(found["opened"].values()) == {1}
