"""Captures whose commands name an input file at two paths (issue 41: two ``capture --batches``
runs, each handed its own copy of one prompts file): ``capture`` fingerprints the files its
command names, and ``whatif`` joins captures whose differing paths hold the same contents, with
nothing declared. On real capture processes, and on B8's real H100 captures (batch 1 and 64,
taken by two runs with ``--prompts`` in their own folders) with the record capture now writes."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from capture_helpers import read_manifest, run_capture
from cli_helpers import verifyprof

from verifyprof.capture import input_digests as digests

ROOT = Path(__file__).resolve().parents[1]
B8 = ROOT / "bench" / "results" / "external_h100_b8" / "captures-b"
MODEL = ("--model", str(ROOT / "bench" / "models" / "gptfast-7b.toml"))
PROGRAM = ["python", "-c", "import sys; print(sys.argv)"]


def _capture(tmp_path, tag, name: str, *args: str) -> dict:
    out = tmp_path / name
    proc = run_capture(["--backend", "none", "--out", str(out), "--", *PROGRAM, *args], tag)
    assert proc.returncode == 0, proc.stderr
    return read_manifest(out)


def test_a_capture_fingerprints_each_file_its_command_names(tmp_path, tag):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "the quick brown fox"}\n')
    doc = _capture(tmp_path, tag, "c", "--prompts", str(prompts), f"--extra={prompts}", "--n", "3")
    target, inputs = doc["command"]["target"], doc["command"]["inputs"]
    expected = "sha256:" + hashlib.sha256(prompts.read_bytes()).hexdigest()
    assert [(target[x["arg"]], x["digest"]) for x in inputs] == [
        (str(prompts), expected),
        (f"--extra={prompts}", expected),
    ]


def test_copies_of_one_file_fingerprint_alike_and_an_edited_copy_does_not(tmp_path):
    a, b, c = (tmp_path / n for n in ("a.jsonl", "b.jsonl", "c.jsonl"))
    a.write_text("same\n")
    shutil.copy(a, b)
    c.write_text("other\n")
    found = [x["digest"] for x in digests.input_digests(["python", str(a), str(b), str(c)])]
    assert found[0] == found[1] != found[2]


def test_a_large_file_is_fingerprinted_by_its_size_and_ends(tmp_path, monkeypatch):
    monkeypatch.setattr(digests, "WHOLE", 16)
    monkeypatch.setattr(digests, "ENDS", 4)
    big, middle = tmp_path / "big.bin", tmp_path / "middle.bin"
    big.write_bytes(b"head" + b"x" * 100 + b"tail")
    middle.write_bytes(b"head" + b"y" * 100 + b"tail")  # only the unread middle differs
    (one,), (two,) = (digests.input_digests(["p", str(p)]) for p in (big, middle))
    assert one["digest"].startswith("sha256-ends:") and one["digest"] == two["digest"]
    big.write_bytes(b"head" + b"x" * 101 + b"tail")  # one byte more: another size
    (three,) = digests.input_digests(["p", str(big)])
    assert three["digest"] != one["digest"]


def test_directories_and_missing_paths_are_not_fingerprinted(tmp_path):
    assert digests.input_digests(["python", str(tmp_path), str(tmp_path / "none"), "-v"]) == []


def _with_inputs(src: Path, dst: Path, contents: bytes, digest: str | None = None) -> Path:
    """A copy of a real capture whose manifest holds the record capture now writes for its
    ``--prompts`` file (these captures were taken before it was written)."""
    shutil.copytree(src, dst)
    doc = json.loads((dst / "manifest.json").read_text())
    target = doc["command"]["target"]
    digest = digest or "sha256:" + hashlib.sha256(contents).hexdigest()
    arg = target.index("--prompts") + 1
    doc["command"]["inputs"] = [{"arg": arg, "bytes": len(contents), "digest": digest}]
    (dst / "manifest.json").write_text(json.dumps(doc))
    return dst


def test_captures_whose_input_paths_hold_the_same_contents_join_with_nothing_declared(tmp_path):
    one = _with_inputs(B8 / "batch-1", tmp_path / "batch-1", b"prompts")
    other = _with_inputs(B8 / "batch-64", tmp_path / "batch-64", b"prompts")
    proc = verifyprof("whatif", str(one), str(other), *MODEL, "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert any(n.startswith("one model from 2 capture(s)") for n in result["load_curve"]["notes"])
    notes = result["current"]["notes"]  # beside where each capture was taken
    said = "--prompts: another path in some captures to a file of the same contents"
    assert any(n.startswith(said) for n in notes)


def test_captures_whose_input_files_differ_are_refused_saying_so(tmp_path):
    one = _with_inputs(B8 / "batch-1", tmp_path / "batch-1", b"prompts")
    other = _with_inputs(B8 / "batch-64", tmp_path / "batch-64", b"other prompts")
    proc = verifyprof("whatif", str(one), str(other), *MODEL)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert "--prompts /tmp/px64/prompts.jsonl against /tmp/px/prompts.jsonl (the files'" in line
    assert "none where" not in line  # two files, not two paths to one


def test_files_declared_none_whose_contents_differ_are_refused_naming_both(tmp_path):
    one = _with_inputs(B8 / "batch-1", tmp_path / "batch-1", b"prompts")
    other = _with_inputs(B8 / "batch-64", tmp_path / "batch-64", b"other prompts")
    proc = verifyprof("whatif", str(one), str(other), *MODEL, "--load-option", "--prompts=none")
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert (
        "--prompts /tmp/px64/prompts.jsonl against /tmp/px/prompts.jsonl is declared none" in line
    )
    assert "the files' contents differ" in line


def test_large_files_matching_in_size_and_ends_only_are_not_taken_as_one(tmp_path):
    ends = "sha256-ends:" + "0" * 64
    one = _with_inputs(B8 / "batch-1", tmp_path / "batch-1", b"", digest=ends)
    other = _with_inputs(B8 / "batch-64", tmp_path / "batch-64", b"", digest=ends)
    proc = verifyprof("whatif", str(one), str(other), *MODEL)
    assert proc.returncode == 2
    assert "none where it only names a path to one input" in proc.stderr


def test_a_capture_run_in_a_folder_named_for_sglang_is_not_an_sglang_server(tmp_path):
    plain = verifyprof("whatif", str(B8 / "batch-1"), "--json")
    named = tmp_path / "batch-1"
    shutil.copytree(B8 / "batch-1", named)
    doc = json.loads((named / "manifest.json").read_text())
    doc["command"]["cwd"] = "/home/u/sglang-experiments"
    (named / "manifest.json").write_text(json.dumps(doc))
    moved = verifyprof("whatif", str(named), "--json")
    assert plain.returncode == moved.returncode == 0, moved.stderr
    before, after = (json.loads(p.stdout)["plain_decoding"] for p in (plain, moved))
    assert after["decode_ms"] == before["decode_ms"] and "SGLang" not in after["source"]


def test_the_note_names_a_same_file_option_beside_a_bookkeeping_option_only_one_has():
    """The arguments set aside (``--warmup``, in one command only) do not shift the pairing that
    finds the paths to one file."""
    from verifyprof.model.decision.capture_identity import Command, load_differences

    same = "sha256:" + "1" * 64
    first = Command("a", "prog.py", ("--warmup", "2", "--prompts", "/a/p"), digests={3: same})
    other = Command("b", "prog.py", ("--prompts", "/b/p"), digests={1: same})
    found: list[str] = []
    assert load_differences(first, other, same_files=found) == {"--warmup": None}
    assert found == ["--prompts"]
