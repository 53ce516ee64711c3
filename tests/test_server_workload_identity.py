"""A server's captures are of one program when its command and the workload that drove it agree:
the ``--prompts`` file by its contents (fingerprinted before the server starts), the prompts'
length and the temperature. Real captures of the fake SGLang server process (no profiler)."""

from __future__ import annotations

import hashlib
import json

import pytest
from capture_helpers import free_port, kill_tagged, new_tag, read_manifest, run_capture
from test_capture_cli import untraced_capture_args

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.manifest import read_manifest as manifest_of
from verifyprof.model.decision.capture_facts import stated_context
from verifyprof.model.decision.capture_identity import command_of, load_differences

PROMPTS = [{"prompt": "Explain speculative decoding in one line.", "max_new_tokens": 16}]
OTHER = [{"prompt": "Write a haiku about GPUs.", "max_new_tokens": 16}]


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    """Captures of one server: prompts A, the same prompts at another path, prompts B; prompts A
    grown to 32 and to 256 tokens (``--input-len``); one path whose file changed between two."""
    root = tmp_path_factory.mktemp("server-workloads")
    tag = new_tag()
    files = {"a": PROMPTS, "a-copy": PROMPTS, "b": OTHER, "short": PROMPTS, "long": PROMPTS}
    lengths = {"short": ("--input-len", "32"), "long": ("--input-len", "256")}
    made = {}
    try:
        for name, prompts in files.items():
            path = root / f"{name}.jsonl"
            path.write_text("".join(json.dumps(p) + "\n" for p in prompts))
            out = root / name
            extra = ("--prompts", str(path), *lengths.get(name, ()))
            ran = run_capture(untraced_capture_args(out, free_port(), extra=extra), tag)
            assert ran.returncode == 0, ran.stderr
            made[name] = (out, path)
        shared = root / "shared.jsonl"  # one path, its file edited between two captures
        for name, prompts in (("same-1", PROMPTS), ("same-2", OTHER)):
            shared.write_text("".join(json.dumps(p) + "\n" for p in prompts))
            extra = ("--prompts", str(shared))
            ran = run_capture(untraced_capture_args(root / name, free_port(), extra=extra), tag)
            assert ran.returncode == 0, ran.stderr
            made[name] = (root / name, shared)
    finally:
        kill_tagged(tag)
    return made


def _command(captures, name: str):
    out, _ = captures[name]
    return command_of(name, manifest_of(out / "manifest.json"), None, None)


def test_a_server_capture_records_its_prompts_files_fingerprint(captures):
    out, path = captures["a"]
    workload = read_manifest(out)["workload"]
    assert workload["prompts"] == str(path)
    assert workload["prompts_digest"] == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def test_server_captures_driven_by_prompts_of_other_contents_are_not_one_program(captures):
    with pytest.raises(VerifyprofError, match=r"--prompts .*b\.jsonl against .*a\.jsonl"
                       r" \(the files' contents differ\)"):  # fmt: skip
        load_differences(_command(captures, "a"), _command(captures, "b"))


def test_one_prompts_path_whose_file_changed_between_captures_is_not_one_input(captures):
    with pytest.raises(VerifyprofError, match=r"--prompts (\S+) against \1 \(the files' contents"):
        load_differences(_command(captures, "same-1"), _command(captures, "same-2"))


def test_the_same_prompts_at_another_path_are_one_input(captures):
    same: list[str] = []
    found = load_differences(_command(captures, "a"), _command(captures, "a-copy"), (), same)
    assert same == ["--prompts"]
    assert found == {"--port": None}  # each capture's server on a port of its own: bookkeeping


def test_a_manifest_whose_workload_is_no_object_is_refused_naming_it(captures, tmp_path):
    out, _ = captures["a"]
    doc = read_manifest(out) | {"workload": "builtin"}
    edited = tmp_path / "manifest.json"
    edited.write_text(json.dumps(doc))
    with pytest.raises(VerifyprofError, match="manifest field 'workload' must be an object"):
        manifest_of(edited)


def test_prompts_of_two_lengths_are_two_contexts_once_declared(captures):
    short, long = _command(captures, "short"), _command(captures, "long")
    with pytest.raises(VerifyprofError, match="--input-len 256 against 32"):
        load_differences(short, long)
    declared = (("--input-len", "context"),)
    assert load_differences(short, long, declared) == {"--input-len": "context", "--port": None}
    manifest = manifest_of(captures["long"][0] / "manifest.json")
    assert stated_context(manifest, None, "long", declared) == (256, "its command's --input-len")
