"""Every file option takes a file (issue 22): a FIFO, a device, a socket or a directory given to
--taxonomy, --manifest, --prompts, --hardware or --model is refused before anything opens it (a
FIFO would block forever, /dev/zero eat memory), a file read whole has a size limit, and text
that is not UTF-8 is one line, never a traceback.

Each command runs as a real process with a timeout (a blocked read is a failed test, not a hung
suite) and an address-space limit (a read that never ends is a failed test, not a dead machine).
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import socket
import subprocess
import sys
from pathlib import Path

import forked_cli
import pytest
from clirun import digest
from conftest import OWN_TRACES, PUBLIC, REPO

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.manifest import read_manifest
from verifyprof.contracts.plumbing.inputs import BREAKDOWN_JSON_LIMIT, MANIFEST_LIMIT, TOML_LIMIT

KINETO = PUBLIC / "kineto" / "tracelens_mi300x_sglang_qwen3-8b_decode.json.gz"  # 36 KB
BREAKDOWN = OWN_TRACES / "capture-hf-assisted" / "breakdown.json"
FAKE_SERVER = Path(__file__).resolve().parent / "fake_sglang_server.py"
SERVER = f"{sys.executable} {FAKE_SERVER} --model-path fake/model"
MEMORY = 3 << 30  # bytes of address space a command may map: /dev/zero read whole passes it


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """A process forked from one that has imported the CLI (``forked_cli``), its address space
    limited to ``MEMORY``."""
    return forked_cli.run(
        args,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        cwd=cwd,
        timeout=120,  # a FIFO read blocks forever: TimeoutExpired fails the test
        limits={resource.RLIMIT_AS: MEMORY},
    )


def one_line(done: subprocess.CompletedProcess, expected: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert lines == [f"verifyprof: error: {expected}"], done.stderr[-2000:]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


COMMANDS = {  # option -> a command line reading the file given to it (FILE)
    "breakdown --taxonomy": ["breakdown", str(KINETO), "--whole-trace", "--taxonomy", "FILE"],
    "kernels --taxonomy": ["kernels", str(KINETO), "--taxonomy", "FILE"],
    "whatif --manifest": ["whatif", "--verify-ms", "10", "--manifest", "FILE"],
    "whatif --from --manifest": ["whatif", "--from", str(BREAKDOWN), "--manifest", "FILE"],
    "whatif --hardware": [
        "whatif",
        "--from",
        str(BREAKDOWN),
        "--accept-len",
        "2",
        "--hardware",
        "FILE",
    ],
    "whatif --model": ["whatif", "--from", str(BREAKDOWN), "--accept-len", "2", "--model", "FILE"],
    "compare --manifest": ["compare", str(BREAKDOWN), str(BREAKDOWN), "--manifest", "FILE"],
    "report --manifest": ["report", str(BREAKDOWN), "--manifest", "FILE", "-o", "r.html"],
    "capture --prompts": [
        *("capture", "--backend", "none", "--server-cmd", SERVER),
        *("--prompts", "FILE", "--out", "cap"),
    ],
}


def option_of(case: str) -> str:
    return case.split()[-1]


@pytest.mark.parametrize("case", COMMANDS)
def test_a_fifo_given_to_a_file_option_is_refused_without_blocking(case, fifo, tmp_path):
    args = [str(fifo) if a == "FILE" else a for a in COMMANDS[case]]
    done = cli(*args, cwd=tmp_path)
    one_line(
        done,
        f"{fifo}: {option_of(case)} is a FIFO (named pipe), not a regular file (reading it would"
        " block or never end)",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # nothing written, no capture


@pytest.mark.parametrize("case", ["breakdown --taxonomy", "whatif --manifest", "whatif --hardware"])
def test_dev_zero_given_to_a_file_option_is_refused_before_it_is_read(case, tmp_path):
    args = ["/dev/zero" if a == "FILE" else a for a in COMMANDS[case]]
    one_line(
        cli(*args, cwd=tmp_path),
        f"/dev/zero: {option_of(case)} is a character device, not a regular file (reading it"
        " would block or never end)",
    )


def test_a_socket_given_to_taxonomy_is_refused(tmp_path):
    path = tmp_path / "sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        args = [str(path) if a == "FILE" else a for a in COMMANDS["breakdown --taxonomy"]]
        one_line(
            cli(*args, cwd=tmp_path),
            f"{path}: --taxonomy is a socket, not a regular file (reading it would block or never"
            " end)",
        )


@pytest.mark.parametrize("case", ["whatif --manifest", "report --manifest", "capture --prompts"])
def test_a_directory_given_to_a_file_option_is_refused(case, tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    args = [str(folder) if a == "FILE" else a for a in COMMANDS[case]]
    one_line(
        cli(*args, cwd=tmp_path), f"{folder}: {option_of(case)} is a directory, expected a file"
    )


# --- sizes ---------------------------------------------------------------------------------------


def test_a_taxonomy_over_the_toml_limit_is_one_line(tmp_path):
    big = tmp_path / "big.toml"
    with big.open("wb") as handle:
        handle.truncate(TOML_LIMIT + 1)  # sparse: no disk, no time
    args = [str(big) if a == "FILE" else a for a in COMMANDS["breakdown --taxonomy"]]
    one_line(
        cli(*args, cwd=tmp_path),
        f"{big}: taxonomy is {TOML_LIMIT + 1:,} bytes, more than the 16 MiB a taxonomy may be",
    )


def test_a_gzipped_manifest_that_inflates_past_the_limit_is_refused(tmp_path):
    bomb = tmp_path / "manifest.json.gz"
    bomb.write_bytes(gzip.compress(b"{" + b" " * MANIFEST_LIMIT + b"}"))  # 17 KB on disk
    with pytest.raises(VerifyprofError) as err:
        read_manifest(bomb)
    assert str(err.value) == (
        f"{bomb}: manifest is more than 16 MiB decompressed, the most a manifest may be"
    )


def test_a_breakdown_json_over_its_limit_is_refused_before_it_is_parsed(tmp_path):
    big = tmp_path / "breakdown.json"
    big.write_text(json.dumps({"schema": "verifyprof.breakdown/1", "steps": []}) + " ")
    with big.open("r+b") as handle:
        handle.truncate(BREAKDOWN_JSON_LIMIT + 1)
    done = cli("whatif", "--from", str(big), "--accept-len", "2", cwd=tmp_path)
    one_line(
        done,
        f"{big}: breakdown JSON is {BREAKDOWN_JSON_LIMIT + 1:,} bytes, more than the 1024 MiB a"
        " breakdown JSON may be",
    )


def test_a_prompts_file_over_its_limit_is_refused_before_the_server_starts(tmp_path):
    big = tmp_path / "prompts.jsonl"
    with big.open("wb") as handle:
        handle.truncate((16 << 20) + 1)
    args = [str(big) if a == "FILE" else a for a in COMMANDS["capture --prompts"]]
    done = cli(*args, cwd=tmp_path)
    one_line(
        done,
        f"{big}: prompts file is {(16 << 20) + 1:,} bytes, more than the 16 MiB a prompts file may"
        " be",
    )
    assert not (tmp_path / "cap").exists()  # rejected before anything started


def test_a_hardware_toml_that_is_not_utf8_is_one_line_not_a_traceback(tmp_path):
    bad = tmp_path / "box.toml"
    bad.write_bytes(b'name = "box"\n\xff\xfe = 1\n')
    kept = digest(bad)
    args = [str(bad) if a == "FILE" else a for a in COMMANDS["whatif --hardware"]]
    one_line(
        cli(*args, cwd=tmp_path),
        f"{bad}: TOML file is not UTF-8 text: invalid start byte at byte 13",
    )
    assert digest(bad) == kept
