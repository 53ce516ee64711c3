"""A stranger's captures, as they are (issue 41): ``whatif`` reads several captures as one
program from what the captures themselves know, never from a list of flag names or a guessed
context. On copies of the real H200 captures of ``bench/results/load_mha_h200`` (C1: batch 1,
C8: batch 8, C1k1: batch 1 with one draft; ``hf_chain.py`` tags its verify steps ``bs=`` and
``tokens=``), their manifests edited as another program's would read: its own option names,
its results without the fields the program does not print, a ``capture --batches`` folder's
``load`` record."""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_helpers import verifyprof

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "bench" / "results" / "load_mha_h200"
MODEL = ("--model", str(ROOT / "bench" / "models" / "hf-chain-7b-mha.toml"))


def copy(src: str, dst: Path, edit: Callable[[dict], None]) -> Path:
    """A copy of a real capture folder whose manifest ``edit`` changed."""
    shutil.copytree(RUNS / src, dst)
    manifest = json.loads((dst / "manifest.json").read_text())
    edit(manifest)
    (dst / "manifest.json").write_text(json.dumps(manifest))
    return dst


def renamed(old: str, new: str, value: str | None = None) -> Callable[[dict], None]:
    """The program's option ``old`` spelled ``new`` (its value ``value`` where given), and the
    results field of the same meaning left out (the program does not print it)."""

    def edit(m: dict) -> None:
        target = m["command"]["target"]
        at = target.index(old)
        target[at] = new
        if value is not None:
            target[at + 1] = value
        field = {"--batch": "batch", "--num-draft": "num_draft"}[old]
        m["results"].pop(field, None)
        for run in m["results"].get("runs", []):
            run.pop(field, None)

    return edit


def no_context(m: dict) -> None:
    """A program that runs at its own default context: on no command line, in no results."""
    target = m["command"]["target"]
    at = target.index("--context")
    del target[at : at + 2]
    m["results"].pop("context", None)
    for run in m["results"].get("runs", []):
        run.pop("context", None)


def whatif(*args) -> tuple[int, str, str]:
    proc = verifyprof("whatif", *map(str, args))
    return proc.returncode, proc.stdout, proc.stderr


def whatif_json(*args) -> dict:
    code, out, err = whatif(*args, "--json")
    assert code == 0, err
    return json.loads(out)


def swept_folder(tmp_path: Path, option: str) -> Path:
    """What ``capture --batches 1,8 --out DIR -- python prog.py OPTION {batch} ...`` writes: one
    folder per batch, each manifest with its load record."""
    out = tmp_path / "sweep"

    def sweep(batch: int) -> Callable[[dict], None]:
        def edit(m: dict) -> None:
            renamed("--batch", option)(m)
            template = list(m["command"]["target"])
            template[template.index(option) + 1] = "{batch}"
            axis = {"value": batch, "placeholder": "{batch}", "option": option}
            m["load"] = {
                "template": template,
                "decode_template": None,
                "axes": {"batch": axis | {"source": "template"}},
            }

        return edit

    copy("C1", out / "batch-1", sweep(1))
    copy("C8", out / "batch-8", sweep(8))
    return out


@pytest.mark.parametrize("option", ["--batches", "--batch_size"])
def test_a_folder_capture_batches_wrote_is_read_whatever_the_programs_batch_option(
    tmp_path, option
):
    result = whatif_json(swept_folder(tmp_path, option), *MODEL)
    notes = result["current"]["notes"]
    assert any(n.startswith("one model from 2 capture(s) of one program: batch-1") for n in notes)
    assert any(n.startswith("batch-8: batch 8 (the trace's bs= tags)") for n in notes)


def test_captures_taken_apart_join_where_the_traces_bs_tags_confirm_the_batch(tmp_path):
    c1 = copy("C1", tmp_path / "C1", renamed("--batch", "--batches"))
    c8 = copy("C8", tmp_path / "C8", renamed("--batch", "--batches"))
    result = whatif_json(c1, c8, *MODEL)
    assert any(n.startswith("one model from 2 capture(s)") for n in result["current"]["notes"])


@pytest.mark.parametrize("spelling", ["--speculate-k", "--speculate_k"])
def test_two_captures_differing_only_in_their_draft_count_join_on_the_verify_width(
    tmp_path, spelling
):
    k4 = copy("C1", tmp_path / "k4", renamed("--num-draft", spelling))
    k1 = copy("C1k1", tmp_path / "k1", renamed("--num-draft", spelling))
    notes = whatif_json(k4, k1, *MODEL, "--details")["current"]["notes"]
    assert (
        "k4: batch 1 (the trace's bs= tags), context 512 (its results), k = 4 (the verify's"
        " width 5)" in notes
    )
    assert any(n.startswith("k1: batch 1") and "k = 1 (the verify's width 2)" in n for n in notes)


@pytest.fixture
def unconfirmed(tmp_path) -> tuple[Path, Path]:
    """Two captures whose draft option counts tokens (k + 1): no evidence says what it sets."""
    return (
        copy("C1", tmp_path / "k4", renamed("--num-draft", "--draft-len", "5")),
        copy("C1k1", tmp_path / "k1", renamed("--num-draft", "--draft-len", "2")),
    )


def test_a_difference_no_evidence_confirms_is_refused_in_one_line_saying_how_to_declare_it(
    unconfirmed,
):
    code, _, err = whatif(*unconfirmed, *MODEL)
    assert code == 2
    (line,) = err.strip().splitlines()
    assert "k1 is not a capture of the same program as k4: --draft-len 2 against 5" in line
    assert line.endswith(
        "declare it: whatif --load-option --draft-len=AXIS (AXIS: batch, num_draft or context"
        " where it sets the load; none where it only names a path to one input)"
    )


def test_a_declared_load_option_joins_the_captures(unconfirmed):
    result = whatif_json(*unconfirmed, *MODEL, "--load-option", "--draft-len=num_draft")
    assert [p["num_draft"] for p in result["draft_curve"]["points"] if p["basis"] == "measured"]


@pytest.fixture
def unstated(tmp_path) -> tuple[Path, Path]:
    """C1 and C8 of a program that states no context."""
    return copy("C1", tmp_path / "C1", no_context), copy("C8", tmp_path / "C8", no_context)


def test_no_stated_context_is_never_taken_from_the_load_curves_context(unstated):
    result = whatif_json(*unstated, *MODEL, "--context", "512,2048")
    load = result["load_curve"]
    assert load["context_assumed"].startswith("context unknown")
    assert {r["basis"] for c in load["contexts"] for r in c["rows"]} == {"assumed"}
    notes = result["current"]["notes"]
    assert any("C1 (batch 1, context unknown, 2048 assumed, k = 4)" in n for n in notes)


def test_the_first_screen_says_the_context_is_unknown_and_how_to_state_it(unstated):
    code, out, err = whatif(*unstated, *MODEL, "--context", "512,2048")
    assert code == 0, err
    screen = out.splitlines()
    assert "  ! context unknown (rows assumed at 2048 tokens): give --capture-context N" in screen


def test_a_stated_context_gives_the_model_of_captures_that_record_theirs(unstated):
    stated = whatif_json(*unstated, *MODEL, "--context", "512,2048", "--capture-context", "512")
    recorded = whatif_json(RUNS / "C1", RUNS / "C8", *MODEL, "--context", "512,2048")
    # the same model; the capture commands it suggests differ only as the captures' own
    # commands do (the unstated copies lost their --context)
    assert _numbers(stated["load_curve"]["contexts"]) == _numbers(
        recorded["load_curve"]["contexts"]
    )
    assert "context_assumed" not in stated["load_curve"]


def _numbers(contexts: list[dict]) -> list[dict]:
    return [{k: v for k, v in c.items() if k != "measure_command"} for c in contexts]


def test_two_captures_at_one_load_that_state_no_context_are_asked_for_it_by_name(
    unstated, tmp_path
):
    twin = copy("C1", tmp_path / "C1-2048", no_context)
    code, _, err = whatif(unstated[0], twin, *MODEL)
    assert code == 2
    (line,) = err.strip().splitlines()
    assert "C1 and C1-2048: both at batch 1 and k = 4, and neither states its context" in line
    assert "--capture-context C1=N --capture-context C1-2048=M" in line
    ok = whatif_json(unstated[0], twin, *MODEL, "--capture-context", "C1-2048=2048",
                     "--capture-context", "C1=512")  # fmt: skip
    assert ok["load_curve"] is not None


def test_a_capture_that_states_no_context_beside_one_that_does_is_named(unstated):
    code, _, err = whatif(RUNS / "C1", unstated[1], *MODEL)
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.startswith("verifyprof: error: C8: context unknown")
    assert "beside C1 at context 512 (its results)" in line
    assert line.endswith("state it: whatif --capture-context C8=N")


def test_report_reads_the_folder_capture_batches_wrote_as_whatif_does(tmp_path):
    folder = swept_folder(tmp_path, "--batches")
    proc = verifyprof("report", str(folder), *MODEL, "--json")
    assert proc.returncode == 0, proc.stderr
    whatif_said = whatif_json(folder, *MODEL)
    assert json.loads(proc.stdout)["whatif"]["load_curve"] == whatif_said["load_curve"]


MOE = ROOT / "bench" / "results" / "moe_spec_h100" / "captures"
MOE_MODEL = ("--model", str(ROOT / "bench" / "models" / "moe-spec-v2lite.toml"))


def test_the_capture_that_would_measure_a_load_is_the_programs_own_command():
    """moe_spec's batch option is --num-seqs (joined on the bs= tags): the capture the load curve
    suggests runs that command with --num-seqs {batch}, not a placeholder PROGRAM ... --batch."""
    data = whatif_json(MOE, *MOE_MODEL)
    commands = [c["measure_command"] for c in data["load_curve"]["contexts"]]
    commands += [
        r["measure_command"]
        for ctx in data["load_curve"]["server_settings"]["per_context"]
        for r in ctx["sglang"]
        if r.get("measure_command")
    ]
    assert commands and all("run_moe_spec.py" in c for c in commands), commands
    assert all("--num-seqs '{batch}'" in c and "PROGRAM" not in c for c in commands)
    # its other values are the capture's own, its batch the only placeholder
    assert all("--draft-len 4" in c and "--num-seqs 1 " not in c for c in commands)


GPTFAST = ROOT / "bench" / "results" / "external_h100" / "captures-a"
GPTFAST_ARGS = ("--model", str(ROOT / "bench/models/gptfast-7b.toml"), "--capture-context", "85")


def test_a_draft_count_another_capture_measured_is_that_captures_cycle_in_the_verdict():
    """gpt-fast captured at k = 1 (today) and k = 4: the draft-count curve's k = 4 is the k = 4
    capture's own cycle, as the load curve's point at today's load is, so the verdict speculates
    with k = 4 (measured best, bench/README) instead of turning speculation off on a k = 4
    re-shaped from k = 1's verify."""
    data = whatif_json(GPTFAST, *GPTFAST_ARGS)
    curve = {p["num_draft"]: p for p in data["draft_curve"]["points"]}
    at_load = next(
        p
        for row in data["load_curve"]["contexts"][0]["rows"]
        if row["batch"] == 1
        for p in row["points"]
        if p["num_draft"] == 4
    )
    assert curve[4]["basis"] == "measured"
    assert abs(curve[4]["tokens_per_s"] - at_load["tokens_per_s"]) < 0.05
    assert data["draft_curve"]["best_num_draft"] == 4
    assert data["verdict_parts"]["decision"].startswith("Speculate today, with k=4")


def equals_spelled(m: dict) -> None:
    """The program's batch option written ``--bs=8``, argparse's other spelling (and no results
    field for it: the trace's bs= tags are the evidence)."""
    target = m["command"]["target"]
    at = target.index("--batch")
    target[at : at + 2] = [f"--bs={target[at + 1]}"]
    m["results"].pop("batch", None)


def test_options_written_name_equals_value_join_on_evidence_and_by_declaration(tmp_path):
    a = copy("C1", tmp_path / "C1", equals_spelled)
    b = copy("C8", tmp_path / "C8", equals_spelled)
    data = whatif_json(a, b, *MODEL)  # bs= tags confirm --bs=1 / --bs=8 as the batch
    assert any("C8: batch 8 (the trace's bs= tags)" in n for n in data["current"]["notes"])
    assert whatif_json(a, b, *MODEL, "--load-option", "--bs=batch")["load_curve"]
    # and the capture it suggests puts the batch in the program's own spelling
    commands = [c["measure_command"] for c in data["load_curve"]["contexts"]]
    assert all("--bs={batch}" in c for c in commands), commands


def test_a_suggested_capture_quotes_every_argument_for_the_shell(tmp_path):
    def jsonish(m: dict) -> None:
        m["command"]["target"] += ["--cfg", '{"method": "eagle", "n": 4}', "--name", "it's"]

    a, b = copy("C1", tmp_path / "C1", jsonish), copy("C8", tmp_path / "C8", jsonish)
    data = whatif_json(a, b, *MODEL)
    for c in (c["measure_command"] for c in data["load_curve"]["contexts"]):
        program = shlex.split(c.split("  # ")[0])
        assert program[program.index("--cfg") + 1] == '{"method": "eagle", "n": 4}'
        assert program[program.index("--name") + 1] == "it's"


def test_a_suggested_capture_keeps_the_captures_own_options():
    """moe_spec's captures need their hooks, baseline and --decode-cmd: the suggestion keeps
    them, its own --out and --batches in place of the captures'."""
    data = whatif_json(MOE, *MOE_MODEL)
    for c in (c["measure_command"] for c in data["load_curve"]["contexts"]):
        argv = shlex.split(c.split("  # ")[0])
        head = argv[: argv.index("--")]
        assert head.count("--hook") == 5 and "--baseline-run" in head and "--decode-cmd" in head
        assert head.count("--out") == 1 and head[head.index("--out") + 1] == "DIR"
        assert head.count("--batches") == 1 and "/tmp/moe/captures" not in c


def test_a_capture_context_label_that_names_no_capture_is_refused():
    code, _, err = whatif(GPTFAST, "--capture-context", "k-9=85")
    assert code == 2
    assert "no capture is called 'k-9'; the captures are k-1, k-4" in err
