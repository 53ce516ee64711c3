"""A program captured once per load on any of three axes (issue 41): ``--batches`` with
``{batch}``, ``--num-drafts`` with ``{num_draft}``, ``--contexts`` with ``{context}``, every
combination, each capture's manifest recording what the capture knows of its load (the command
before the values went in, each value, its placeholder and the program option it sat in), and
``--program-context`` for a program that states its context nowhere. On real processes: a
Python program that prints its arguments."""

from __future__ import annotations

from capture_helpers import assert_nothing_left, read_manifest, run_capture

from verifyprof.capture.load_axes import capture_folders

PROGRAM = ["python", "-c", "import sys; print(sys.argv)"]
DECODE = (  # a plain-decoding run: its rate where capture reads it
    "import json, os, pathlib;"
    " pathlib.Path(os.environ['VERIFYPROF_CAPTURE_DIR'], 'results.json').write_text("
    "json.dumps({'tokens_per_s': 50.0}))"
)


def test_two_axes_are_captured_at_every_combination_in_folders_named_for_their_load(tmp_path, tag):
    out = tmp_path / "sweep"
    args = ["--backend", "none", "--batches", "1,8", "--num-drafts", "1,4", "--out", str(out)]
    program = [*PROGRAM, "--batch_size", "{batch}", "--speculate-k={num_draft}"]
    proc = run_capture([*args, "--", *program], tag)
    assert proc.returncode == 0, proc.stderr
    names = ["batch-1_k-1", "batch-1_k-4", "batch-8_k-1", "batch-8_k-4"]
    assert [p.name for p in capture_folders(out)] == names
    doc = read_manifest(out / "batch-8_k-4")
    assert doc["command"]["target"][-3:] == ["--batch_size", "8", "--speculate-k=4"]
    assert doc["load"] == {
        "template": program,
        "decode_template": None,
        "axes": {
            "batch": {
                "value": 8, "placeholder": "{batch}", "option": "--batch_size",
                "source": "template",
            },
            "num_draft": {
                "value": 4, "placeholder": "{num_draft}", "option": "--speculate-k",
                "source": "template",
            },
        },
    }  # fmt: skip
    assert "load" not in doc["options"]
    assert_nothing_left(tag)


def test_contexts_are_captured_one_folder_each_the_value_in_the_decode_command_too(tmp_path, tag):
    out = tmp_path / "sweep"
    decode = f'python -c "{DECODE}" {{context}}'
    args = ["--backend", "none", "--contexts", "512,2048", "--decode-cmd", decode]
    proc = run_capture([*args, "--out", str(out), "--", *PROGRAM, "{context}"], tag)
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in capture_folders(out)] == ["ctx-512", "ctx-2048"]
    load = read_manifest(out / "ctx-2048")["load"]
    assert load["decode_template"] == decode
    assert load["axes"]["context"]["value"] == 2048
    assert load["axes"]["context"]["option"] is None  # a positional argument
    assert read_manifest(out / "ctx-2048")["options"]["decode_cmd"].endswith('" 2048')


def test_a_program_context_is_recorded_as_declared(tmp_path, tag):
    out = tmp_path / "one"
    args = ["--backend", "none", "--program-context", "300", "--out", str(out)]
    proc = run_capture([*args, "--", *PROGRAM], tag)
    assert proc.returncode == 0, proc.stderr
    assert read_manifest(out)["load"] == {
        "template": None,
        "decode_template": None,
        "axes": {"context": {"value": 300, "placeholder": None, "option": None,
                             "source": "declared"}},
    }  # fmt: skip


def test_a_placeholder_no_axis_fills_is_refused_before_anything_starts(tmp_path, tag):
    out = tmp_path / "sweep"
    args = ["--backend", "none", "--batches", "1,8", "--out", str(out)]
    proc = run_capture([*args, "--", *PROGRAM, "{batch}", "--ctx", "{context}"], tag)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert "names {context}: give --contexts" in line and not out.exists()


def test_an_axis_whose_placeholder_the_program_lacks_is_refused_before_anything_starts(
    tmp_path, tag
):
    out = tmp_path / "sweep"
    args = ["--backend", "none", "--batches", "1", "--num-drafts", "1,4", "--out", str(out)]
    proc = run_capture([*args, "--", *PROGRAM, "{batch}"], tag)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert "--num-drafts: the program's command names no {num_draft}" in line
    assert not out.exists()


def test_program_context_beside_contexts_is_refused(tmp_path, tag):
    out = tmp_path / "sweep"
    args = ["--backend", "none", "--contexts", "512", "--program-context", "512"]
    proc = run_capture([*args, "--out", str(out), "--", *PROGRAM, "{context}"], tag)
    assert proc.returncode == 2 and "--program-context" in proc.stderr and not out.exists()


def test_a_sweeps_folders_are_found_in_load_order_old_and_new_names_alike(tmp_path):
    for name in ("batch-8", "batch-1", "k-4", "ctx-512", "batch-8_k-1", "notes", "k-x"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.json").write_text("{}")
    found = [p.name for p in capture_folders(tmp_path)]
    assert found == ["ctx-512", "k-4", "batch-1", "batch-8", "batch-8_k-1"]
