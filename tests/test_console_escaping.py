"""Names are data (issue 22): a kernel or range name holding escape sequences (ESC ] 0 ; ... BEL
retitles a terminal, ESC [ 2 J clears it) is printed with its control characters escaped,
never passed to the user's terminal. Real traces, their names edited in copies."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3

from cli_helpers import verifyprof
from conftest import PUBLIC

from verifyprof.contracts.plumbing.text import safe_text

MOCK = PUBLIC / "nsys" / "nsysai_mock_rtx3080_nsys2026.1.sqlite"
MI300X = PUBLIC / "kineto" / "tracelens_mi300x_sglang_qwen3-8b_decode.json.gz"
RETITLE = "\x1b]0;owned\x07"
CLEAR = "\x1b[2J"


def assert_disarmed(text: str) -> None:
    """No ESC ] (operating-system command) nor BEL reaches the terminal; the name shows, its
    control characters written as escapes (step names have their digits as N)."""
    assert "\x1b]" not in text and "\x07" not in text and "\x1b[2J" not in text
    assert "\\x1b]" in text and "\\x07" in text


def test_safe_text_escapes_c0_del_c1_and_bidi_overrides_and_keeps_what_is_asked():
    assert safe_text("gemm\x1b[2J\x7f\x9b\u202eok") == "gemm\\x1b[2J\\x7f\\x9b\\u202eok"
    assert safe_text("a\tb\nc", keep="\n") == "a\\x09b\nc"
    assert safe_text("void f<int, 4>(float*) — ü") == "void f<int, 4>(float*) — ü"


def test_kernel_names_with_escape_sequences_are_printed_escaped(tmp_path):
    path = tmp_path / "evil.sqlite"
    shutil.copyfile(MOCK, path)
    con = sqlite3.connect(path)
    con.execute(
        "UPDATE StringIds SET value = ? WHERE id IN (SELECT demangledName FROM"
        " CUPTI_ACTIVITY_KIND_KERNEL)",
        (f"evil{RETITLE}kernel{CLEAR}",),
    )
    con.commit()
    con.close()
    done = verifyprof("kernels", str(path))
    assert done.returncode == 0, done.stderr
    assert_disarmed(done.stdout)


def test_range_names_with_escape_sequences_are_printed_escaped(tmp_path):
    with gzip.open(MI300X, "rt") as handle:
        doc = json.load(handle)
    for event in doc["traceEvents"]:
        if event.get("cat") == "user_annotation":
            event["name"] = f"step{RETITLE}{CLEAR}"
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(doc))
    done = verifyprof("breakdown", str(path), "--range", "step", "--all")
    assert done.returncode == 0, done.stderr
    assert_disarmed(done.stdout)


def test_an_error_naming_a_path_with_escape_sequences_prints_it_escaped(tmp_path):
    folder = tmp_path / f"run{RETITLE}{CLEAR}"
    folder.mkdir()
    path = folder / "absent.sqlite"
    done = verifyprof("breakdown", str(path))
    assert done.returncode == 2
    assert_disarmed(done.stderr)
    assert done.stderr.startswith(f"verifyprof: error: {safe_text(str(path))}: ")


def test_a_usage_error_quoting_an_argument_with_escape_sequences_prints_it_escaped():
    done = verifyprof("whatif", f"--verify-ms{RETITLE}", "30")
    assert done.returncode == 2
    assert_disarmed(done.stderr)


def test_counts_are_plural_only_when_not_one():
    """Issue 27: "1 launches", "1 host syncs"."""
    from verifyprof.contracts.plumbing.text import counted

    assert [counted(n, "launch") for n in (1, 2, 0, 1.5)] == [
        "1 launch",
        "2 launches",
        "0 launches",
        "1.5 launches",
    ]
    assert counted(1, "host sync") == "1 host sync" and counted(3, "step") == "3 steps"


def test_a_newline_in_a_capture_folders_name_is_shown_escaped_in_whatifs_notes(tmp_path):
    """Before, the notes that name the capture (its manifest, the captures of one program)
    broke the bullet list in two at the name's newline: a line no note wrote."""
    from pathlib import Path

    runs = Path(__file__).resolve().parents[1] / "bench" / "results" / "load_mha_h200"
    folders = [tmp_path / "C1\nforged line", tmp_path / "C8"]
    for folder, name in zip(folders, ("C1", "C8")):
        folder.mkdir()
        kept = ("capture.sqlite.gz", "breakdown.json")  # a trace, or the breakdown kept instead
        trace = next(runs / name / f for f in kept if (runs / name / f).exists())
        (folder / trace.name).symlink_to(trace)
        shutil.copy(runs / name / "manifest.json", folder / "manifest.json")
    model = runs.parents[1] / "models" / "hf-chain-7b-mha.toml"
    proc = verifyprof("whatif", *map(str, folders), "--model", str(model), "--details")
    assert proc.returncode == 0, proc.stderr
    assert not any(line.startswith("forged line") for line in proc.stdout.splitlines())
    assert "C1\\x0aforged line" in proc.stdout
