"""``verifyprof capture -- python script.py`` on a third-party-style program: hooks on the script's
own sibling modules, missing hooks made loud, all with real child processes (torch's CPU build;
the program records its own torch-profiler trace, where the hook ranges show)."""

from __future__ import annotations

import gzip
import json
import sys
import textwrap
from pathlib import Path

from capture_helpers import read_manifest, run_capture

MYMOD = '''
import torch

def model_forward(input_ids, cache=None):
    """The target's verify (k+1 tokens) and the draft's catch-up (1 token), one function."""
    return input_ids * 2
'''

SCRIPT = """
import os, sys
import torch
from torch.profiler import ProfilerActivity, profile
import mymod

widths = [int(w) for w in sys.argv[1:]] or [5, 5]
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for width in widths:
        mymod.model_forward(torch.ones(1, width))
prof.export_chrome_trace(os.path.join(os.environ["VERIFYPROF_CAPTURE_DIR"], "program.trace.json"))
"""


def write_program(folder: Path, script: str = SCRIPT, mymod: str = MYMOD) -> Path:
    """A script and the sibling module it imports, in their own folder (not on any path)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mymod.py").write_text(textwrap.dedent(mymod))
    (folder / "script.py").write_text(textwrap.dedent(script))
    return folder / "script.py"


def annotations(out: Path, name: str = "program.trace.json") -> list[str]:
    """The verifyprof ranges the program's own torch-profiler trace recorded, in order."""
    path = out / name
    raw = path.read_bytes()
    events = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)["traceEvents"]
    ranges = sorted(
        (
            e
            for e in events
            if e.get("cat") == "user_annotation" and e["name"].startswith("verifyprof.")
        ),
        key=lambda e: e["ts"],
    )
    return [e["name"] for e in ranges]


def capture_program(
    out: Path, script: Path, hooks: list[str], *args: str, extra: tuple[str, ...] = (), tag: str
):
    flags = [item for hook in hooks for item in ("--hook", hook)]
    return run_capture(
        [
            "--backend",
            "none",
            "--out",
            str(out),
            *flags,
            *extra,
            "--",
            sys.executable,
            str(script),
            *args,
        ],
        tag,
        timeout=240,
    )


def test_a_hook_on_the_scripts_sibling_module_records_verify_ranges(tmp_path, tag):
    script = write_program(tmp_path / "prog")
    out = tmp_path / "cap"
    proc = capture_program(out, script, ["mymod:model_forward=verify"], tag=tag)
    assert proc.returncode == 0, proc.stderr
    assert annotations(out) == ["verifyprof.verify", "verifyprof.verify"]
    hooks = read_manifest(out)["hooks"]
    assert hooks["fired"] == {"user hook mymod:model_forward=verify": 2}
    assert hooks["never_fired"] == [] and hooks["program_folder"] == str(script.parent)
    assert [p["calls"] for p in hooks["processes"]] == [{"user hook mymod:model_forward=verify": 2}]
    assert "hook ranges: user hook mymod:model_forward=verify: 2 (in 1 process)" in proc.stdout


def test_no_range_recorded_at_all_fails_with_exit_2_and_lists_what_never_fired(tmp_path, tag):
    script = write_program(tmp_path / "prog")
    out = tmp_path / "cap"
    proc = capture_program(
        out, script, ["mymod:no_such_function=verify", "notimported:f=draft"], tag=tag
    )
    assert proc.returncode == 2, proc.stderr
    assert "no verifyprof range was recorded" in proc.stderr
    assert "user hook mymod:no_such_function=verify (verify): missing:" in proc.stderr
    assert (
        "user hook notimported:f=draft (draft): pending: module notimported not importable yet"
        in proc.stderr
    )
    assert "--allow-missing-hooks" in proc.stderr and "Traceback" not in proc.stderr
    doc = read_manifest(out)
    assert doc["status"] == "failed" and [r["source"] for r in doc["hooks"]["never_fired"]] == [
        "user hook mymod:no_such_function=verify",
        "user hook notimported:f=draft",
    ]


def test_allow_missing_hooks_keeps_exit_0_and_still_lists_what_never_fired(tmp_path, tag):
    script = write_program(tmp_path / "prog")
    out = tmp_path / "cap"
    proc = capture_program(
        out, script, ["mymod:no_such_function=verify"], extra=("--allow-missing-hooks",), tag=tag
    )
    assert proc.returncode == 0, proc.stderr
    assert "hook ranges: none recorded" in proc.stdout
    assert "user hook mymod:no_such_function=verify (verify): missing:" in proc.stdout
    assert read_manifest(out)["status"] == "ok"


def test_a_hook_that_fires_beside_one_that_never_does_exits_0_and_names_the_silent_one(
    tmp_path, tag
):
    script = write_program(tmp_path / "prog")
    out = tmp_path / "cap"
    proc = capture_program(
        out, script, ["mymod:model_forward=verify", "notimported:f=draft"], tag=tag
    )
    assert proc.returncode == 0, proc.stderr
    assert "never fired (1):" in proc.stdout and "user hook notimported:f=draft" in proc.stdout


COMPILED_MYMOD = (
    MYMOD
    + """

def compile_forward():
    global model_forward
    model_forward = torch.compile(model_forward, backend="eager", fullgraph=True)

def step(input_ids):
    return model_forward(input_ids)
"""
)

COMPILED_SCRIPT = """
import os
import torch
from torch.profiler import ProfilerActivity, profile
import mymod

mymod.compile_forward()  # the third-party script's own switch: Dynamo traces what it is given
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for _ in range(3):
        assert torch.equal(mymod.step(torch.ones(1, 4)), torch.full((1, 4), 2.0))
prof.export_chrome_trace(os.path.join(os.environ["VERIFYPROF_CAPTURE_DIR"], "program.trace.json"))
"""


def test_a_hooked_global_rebound_to_its_compiled_self_runs_with_the_range_around_each_call(
    tmp_path, tag
):
    script = write_program(tmp_path / "prog", COMPILED_SCRIPT, COMPILED_MYMOD)
    out = tmp_path / "cap"
    proc = capture_program(out, script, ["mymod:model_forward=verify"], tag=tag)
    assert proc.returncode == 0, proc.stderr + (out / "program.log").read_text()[-3000:]
    assert annotations(out) == ["verifyprof.verify"] * 3
    assert read_manifest(out)["hooks"]["fired"] == {"user hook mymod:model_forward=verify": 3}


HELPER_SCRIPT = (
    SCRIPT
    + """
import subprocess
# a worker: hooks installed, no phase run
subprocess.run(
    [sys.executable, "-c", "import mymod"],
    check=True,
    cwd=os.path.dirname(os.path.abspath(__file__)),
)
"""
)


def test_the_manifest_lists_only_processes_that_ran_hooked_phases(tmp_path, tag):
    script = write_program(tmp_path / "prog", HELPER_SCRIPT)
    out = tmp_path / "cap"
    proc = capture_program(out, script, ["mymod:model_forward=verify"], tag=tag)
    assert proc.returncode == 0, proc.stderr
    hooks = read_manifest(out)["hooks"]
    assert (
        len(list((out / "hooks").glob("hooks-*.json"))) == 2
    )  # both processes installed the hooks
    assert [p["argv"][0] for p in hooks["processes"]] == [str(script)] and hooks[
        "idle_processes"
    ] == 1


def test_tagged_hooks_from_the_cli_split_one_function_into_verify_and_draft_extend_by_width(
    tmp_path, tag
):
    script = write_program(tmp_path / "prog")
    out = tmp_path / "cap"
    tagged = [
        "mymod:model_forward=verify;tokens=arg0.shape[-1];when=arg0.shape[-1] > 1",
        "mymod:model_forward=draft_extend;tokens=arg0.shape[-1]",
    ]
    proc = capture_program(out, script, tagged, "5", "1", "5", "1", tag=tag)
    assert proc.returncode == 0, proc.stderr
    assert (
        annotations(out) == ["verifyprof.verify tokens=5", "verifyprof.draft_extend tokens=1"] * 2
    )
    assert sorted(read_manifest(out)["hooks"]["fired"].values()) == [2, 2]


def test_a_hook_on_a_function_of_the_main_script_is_refused_before_the_program_starts(
    tmp_path, tag
):
    script = write_program(
        tmp_path / "prog", script="def step(x):\n    return x\n\nopen('started', 'w').close()\n"
    )
    out = tmp_path / "cap"
    proc = capture_program(out, script, ["script:step=verify"], tag=tag)
    assert proc.returncode == 2, proc.stderr
    assert "script is the program's main module: it runs as __main__" in proc.stderr
    assert (
        "move the function into a module the program imports" in proc.stderr
        and "Traceback" not in proc.stderr
    )
    assert (
        not (tmp_path / "started").exists()
        and not (script.parent / "started").exists()
        and not out.exists()
    )
