"""A capture kept as its breakdown may keep it gzipped (``breakdown.json.gz``): an eager batched
capture's breakdown is ~0.6 MB plain and a tenth of that gzipped, which is what lets a GPU proof's
captures stay in the tree (bench/results/external_h100_b4). Read back, it is the same breakdown:
whatif on the folder prints what it prints on the plain one; named directly it is a breakdown
JSON, not a Kineto trace; a broken gzip is still one line naming the file.

Real captures: program B's batch-1 and batch-8 captures on an H100 (bench/results/external_h100_b2,
kept gzipped), copied, their breakdowns gunzipped in the plain copy."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

from cli_helpers import verifyprof

from verifyprof.trace.path_checks import kept_breakdown
from verifyprof.trace.sources import is_breakdown_json

ROOT = Path(__file__).resolve().parents[1]
B2 = ROOT / "bench/results/external_h100_b2/captures-b"
MODEL = ["--model", str(ROOT / "bench/models/gptfast-7b.toml"), "--capture-context", "71"]


def copied(tmp_path: Path, gz: bool) -> Path:
    """B2's batch-1 and batch-8 captures under tmp_path, their breakdowns kept gzipped (as B2
    keeps them) if gz, else gunzipped to a plain ``breakdown.json``."""
    out = tmp_path / ("gz" if gz else "plain")
    for name in ("batch-1", "batch-8"):
        shutil.copytree(B2 / name, out / name)
        kept = out / name / "breakdown.json.gz"
        if not gz:
            (out / name / "breakdown.json").write_bytes(gzip.decompress(kept.read_bytes()))
            kept.unlink()
    return out


def test_a_gzipped_kept_breakdown_is_the_folders_breakdown(tmp_path: Path) -> None:
    folder = copied(tmp_path, gz=True) / "batch-1"
    assert kept_breakdown(folder) == folder / "breakdown.json.gz"
    assert is_breakdown_json(folder / "breakdown.json.gz")


def test_whatif_on_gzipped_captures_prints_what_it_prints_on_plain_ones(tmp_path: Path) -> None:
    folders = {gz: copied(tmp_path, gz) for gz in (False, True)}
    assert kept_breakdown(folders[False] / "batch-1") == folders[False] / "batch-1/breakdown.json"
    runs = {gz: verifyprof("whatif", str(folders[gz]), *MODEL) for gz in folders}
    for done in runs.values():
        assert done.returncode == 0, done.stderr
    assert "Verdict:" in runs[True].stdout
    same = runs[True].stdout.replace(str(folders[True]), str(folders[False]))
    assert same == runs[False].stdout


def test_a_gzipped_kineto_trace_is_not_taken_for_a_breakdown(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json.gz"
    trace.write_bytes(gzip.compress(b'{"traceEvents": [], "schemaVersion": 1}'))
    assert not is_breakdown_json(trace)


def test_a_truncated_gzipped_breakdown_is_one_line_naming_it(tmp_path: Path) -> None:
    folder = copied(tmp_path, gz=True) / "batch-1"
    kept = folder / "breakdown.json.gz"
    kept.write_bytes(kept.read_bytes()[:5000])
    done = verifyprof("whatif", str(folder))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(kept) in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_a_folder_keeping_both_a_plain_and_a_gzipped_breakdown_is_refused_naming_it(tmp_path):
    folder = copied(tmp_path, gz=True) / "batch-1"
    with gzip.open(folder / "breakdown.json.gz") as src:
        (folder / "breakdown.json").write_bytes(src.read())
    done = verifyprof("whatif", str(folder))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(folder) in lines[0], done.stderr
    assert "breakdown.json and breakdown.json.gz" in lines[0]


def test_breakdown_of_a_kept_capture_says_which_commands_read_it(tmp_path: Path) -> None:
    folder = copied(tmp_path, gz=True) / "batch-1"
    done = verifyprof("breakdown", str(folder))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert str(folder) in line and "kept as its breakdown (breakdown.json.gz)" in line
    assert "whatif, compare or report" in line
