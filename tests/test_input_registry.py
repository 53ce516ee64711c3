"""Nothing lost, wherever an input came from (issue 22): every file a command reads, found inside a
capture folder or named by an option, is known before anything is written, and an output that
would land on one is refused up front, naming both, with every input byte-identical after.

Real CLI runs (``verifyprof.cli.main`` in this process) on copies of the bundled capture folders."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from cli_helpers import verifyprof
from clirun import folder_state
from conftest import NSYS_REP_HEAD, OWN_TRACES, PUBLIC

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.plumbing import inputs, outputs
from verifyprof.contracts.plumbing.inputs import InputRegistry

EAGER = OWN_TRACES / "workload-dense-eager"  # trace.sqlite.gz beside manifest.json
HF = OWN_TRACES / "capture-hf-assisted"  # capture.sqlite.gz (its .nsys-rep: the head in tests/data)
KINETO = PUBLIC / "kineto" / "tracelens_mi300x_sglang_qwen3-8b_decode.json.gz"  # 36 KB
TAXONOMY = Path(__file__).resolve().parents[1] / "verifyprof" / "data" / "taxonomy.toml"


@pytest.fixture(autouse=True)
def _no_active_registry():
    yield
    inputs.activate(None)


@pytest.fixture
def capture_dir(tmp_path: Path) -> Path:
    """A capture folder as ``verifyprof capture`` leaves one: its trace beside manifest.json."""
    folder = tmp_path / "DIR"
    folder.mkdir()
    for name in ("trace.sqlite.gz", "manifest.json"):
        shutil.copyfile(EAGER / name, folder / name)
    return folder


def refused(done, output: str, words: str) -> str:
    """The one error line: the output's path, then what it would overwrite."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0] == f"verifyprof: error: {output}: {words}", lines[0]
    assert "Traceback" not in done.stderr
    return lines[0]


# --- report -o -----------------------------------------------------------------------------------


def test_report_refuses_to_write_onto_the_trace_inside_a_capture_folder(capture_dir, tmp_path):
    before = folder_state(tmp_path)
    out = capture_dir / "trace.sqlite.gz"
    done = verifyprof("report", str(capture_dir), "-o", str(out))
    refused(
        done, str(out), "-o would overwrite an input of this command (the capture folder's trace)"
    )
    assert folder_state(tmp_path) == before


def test_report_refuses_to_write_onto_the_manifest_of_a_capture_folder(capture_dir, tmp_path):
    before = folder_state(tmp_path)
    out = capture_dir / "manifest.json"
    done = verifyprof("report", str(capture_dir), "-o", str(out))
    refused(
        done,
        str(out),
        "-o would overwrite an input of this command (the capture folder's manifest)",
    )
    assert folder_state(tmp_path) == before


def test_report_refuses_an_output_that_is_a_symlink_to_the_trace(capture_dir, tmp_path):
    link = tmp_path / "report.html"
    link.symlink_to(capture_dir / "trace.sqlite.gz")
    before = folder_state(capture_dir)
    done = verifyprof("report", str(capture_dir), "-o", str(link))
    refused(
        done,
        str(link),
        "-o would overwrite an input of this command (the capture folder's trace,"
        f" {capture_dir / 'trace.sqlite.gz'})",
    )
    assert folder_state(capture_dir) == before and link.is_symlink()


def test_report_refuses_to_write_onto_the_breakdown_it_compares_with(tmp_path):
    after = tmp_path / "after.json"
    shutil.copyfile(HF / "breakdown.json", after)
    before = folder_state(tmp_path)
    done = verifyprof(
        "report", str(HF / "breakdown.json"), "--compare", str(after), "-o", str(after)
    )
    refused(
        done,
        str(after),
        "-o would overwrite an input of this command (the --compare input, a breakdown JSON)",
    )
    assert folder_state(tmp_path) == before


# --- breakdown --csv / --parquet -----------------------------------------------------------------


def test_breakdown_csv_onto_the_manifest_of_a_capture_folder_is_refused(capture_dir, tmp_path):
    before = folder_state(tmp_path)
    out = capture_dir / "manifest.json"
    done = verifyprof("breakdown", str(capture_dir), "--csv", str(out))
    refused(
        done,
        str(out),
        "--csv would overwrite an input of this command (the capture folder's manifest)",
    )
    assert folder_state(tmp_path) == before


def test_an_output_onto_the_other_form_of_the_capture_read_is_refused(tmp_path):
    """The folder's SQLite export is read; its .nsys-rep is the same capture, and as precious."""
    folder = tmp_path / "HF"
    shutil.copytree(HF, folder)
    out = folder / "capture.nsys-rep"  # the same capture's report beside its export
    out.write_bytes(NSYS_REP_HEAD.read_bytes())
    before = folder_state(tmp_path)
    done = verifyprof("breakdown", str(folder), "--parquet", str(out))
    refused(
        done,
        str(out),
        "--parquet would overwrite an input of this command (the capture folder's trace)",
    )
    assert folder_state(tmp_path) == before


def test_csv_naming_the_taxonomy_file_is_refused(tmp_path):
    rules = tmp_path / "rules.toml"
    shutil.copyfile(TAXONOMY, rules)
    before = folder_state(tmp_path)
    done = verifyprof(
        "breakdown", str(KINETO), "--whole-trace", "--taxonomy", str(rules), "--csv", str(rules)
    )
    refused(
        done, str(rules), "--csv would overwrite an input of this command (the --taxonomy file)"
    )
    assert folder_state(tmp_path) == before


def test_csv_naming_a_hard_link_of_the_manifest_file_is_refused(tmp_path):
    manifest = tmp_path / "manifest.json"
    shutil.copyfile(EAGER / "manifest.json", manifest)
    os.link(manifest, tmp_path / "steps.csv")
    before = folder_state(tmp_path)
    done = verifyprof(
        "breakdown",
        str(KINETO),
        "--whole-trace",
        "--manifest",
        str(manifest),
        "--csv",
        str(tmp_path / "steps.csv"),
    )
    refused(
        done,
        str(tmp_path / "steps.csv"),
        f"--csv would overwrite an input of this command (the --manifest file, {manifest})",
    )
    assert folder_state(tmp_path) == before


def test_csv_onto_the_taxonomy_in_use_from_the_data_directory_is_refused(tmp_path):
    (tmp_path / "taxonomy.toml").write_bytes(TAXONOMY.read_bytes())
    before = folder_state(tmp_path)
    out = tmp_path / "taxonomy.toml"
    done = verifyprof(
        "breakdown",
        str(KINETO),
        "--whole-trace",
        "--csv",
        str(out),
        env={"VERIFYPROF_DATA_DIR": str(tmp_path)},
    )
    refused(
        done,
        str(out),
        f"--csv would overwrite an input of this command (the taxonomy in use, {out})",
    )
    assert folder_state(tmp_path) == before


def test_an_output_beside_the_inputs_of_a_capture_folder_is_written(capture_dir):
    kept = folder_state(capture_dir)
    done = verifyprof("breakdown", str(capture_dir), "--csv", str(capture_dir / "steps.csv"))
    assert done.returncode == 0, done.stderr
    assert (capture_dir / "steps.csv").read_text().startswith("index,")
    assert {k: v for k, v in folder_state(capture_dir).items() if k != "steps.csv"} == kept


# --- the atomic writer asks the run's registry too ---------------------------------------------


def test_the_atomic_writer_refuses_an_input_of_the_active_run_naming_its_role(tmp_path):
    manifest = tmp_path / "manifest.json"
    manifest.write_text("{}")
    registry = InputRegistry()
    registry.add(manifest, "the capture folder's manifest")
    inputs.activate(registry)
    with pytest.raises(VerifyprofError) as err:
        outputs.write_text(tmp_path / "." / "manifest.json", "overwritten")
    assert str(err.value) == (
        f"{tmp_path}/manifest.json: would overwrite an input of this command (the capture"
        " folder's manifest)"
    )
    assert manifest.read_text() == "{}"


def test_a_deleted_input_whose_inode_is_reused_is_no_longer_an_input(tmp_path):
    """A long-lived process (the tests, a notebook): a file made after an input was deleted may get
    its inode; it is not that input."""
    old, fresh = tmp_path / "old.toml", tmp_path / "fresh.csv"
    old.write_text("x")
    registry = InputRegistry()
    registry.add(old, "the --taxonomy file")
    entry = next(iter(registry.by_id.values()))
    old.unlink()
    fresh.write_text("y")
    st = fresh.stat()
    registry.by_id = {(st.st_dev, st.st_ino): entry}  # what the filesystem reusing the inode does
    registry.check(fresh, "--csv")
    assert fresh not in registry
