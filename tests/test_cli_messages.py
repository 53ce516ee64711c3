"""What the commands say is usable as said (review s2, findings 4, 7 and 12): a hint names only
options its command accepts, a table in an 80-column pipe keeps its numbers whole, and a run whose
every file fails, or an output option given empty or twice, is one line, exit 2."""

from __future__ import annotations

import functools
import json
import re

import pytest
from cli_helpers import REPO, verifyprof

T = REPO / "traces"
COMMANDS = ("breakdown", "kernels", "whatif", "report", "compare", "capture", "hooks")
# the hints that pick the verify group, as the model words them (every command takes both)
PICK_HINTS = ("pick with --width", "pick another with --mode")
# traces whose verify steps differ in width (the most frequent is modelled) or in mode (the
# manifest's run picks it)
HINTED = {"capture-hf-assisted": "width", "workload-dense-compile": "mode"}
# whatif's own inputs, named in whatif's candidates' reasons ("roofline floor needs --model") that
# breakdown's verdict and report's page quote: not yet in those commands' words (a known gap)
WHATIF_REASON_INPUTS = {"--model", "--hardware", "--drafter-gain", "--survival", "--context"}


@functools.cache
def accepted(command: str) -> frozenset[str]:
    """The options ``verifyprof COMMAND --help`` lists (its option column, not its prose)."""
    done = verifyprof(command, "--help")
    assert done.returncode == 0, done.stderr
    found = re.findall(r"^  (?:(-[a-z]), )?(--[a-z][a-z-]*)", done.stdout, re.MULTILINE)
    return frozenset(o for pair in found for o in pair if o)


def named(text: str, command: str | None = None) -> set[str]:
    """The verifyprof options a text names as its own command's: not one after another command's
    name (``whatif --baseline-tps``, ``capture --decode-cmd``), nor in a whole command line of
    another verifyprof command (``verifyprof capture --batches 64 --out DIR ...``), nor another
    program's (SGLang's ``--speculative-num-steps``: no verifyprof command has it)."""
    others = [c for c in COMMANDS if c != command] + ["capture"]
    # a command line runs to its line's (or its JSON string's) end: a program's own command after
    # capture's -- may quote its arguments ('')
    text = re.sub(rf"verifyprof (?:{'|'.join(others)})\b[^\n\"]*", "", text)
    ours = frozenset().union(*(accepted(c) for c in COMMANDS))
    qualified = rf"\b(?:{'|'.join(COMMANDS)}) $"
    return {
        m.group(1)
        for m in re.finditer(r"(?<![\w-])(--[a-z][a-z-]*)", text)
        if m.group(1) in ours and not re.search(qualified, text[max(0, m.start() - 12) : m.start()])
    }


def outputs(command: str, trace: str, tmp_path) -> list[str]:
    """What the command prints on the trace (tables and JSON; report's page too)."""
    path = str(T / trace)
    if command == "report":
        page = tmp_path / "page.html"
        done = verifyprof("report", path, "-o", str(page), "--json")
        assert done.returncode == 0, done.stderr
        return [done.stdout, done.stderr, page.read_text()]
    args = [path, path] if command == "compare" else [path]
    texts = []
    for extra in ([], ["--json"]):
        done = verifyprof(command, *args, *extra)
        assert done.returncode == 0, done.stderr
        texts += [done.stdout, done.stderr]
    return texts


@pytest.mark.parametrize("trace", sorted(HINTED))
@pytest.mark.parametrize("command", ["breakdown", "kernels", "whatif", "report", "compare"])
def test_every_option_a_command_names_is_one_it_accepts(command, trace, tmp_path):
    texts = outputs(command, trace, tmp_path)
    everything = "\n".join(texts)
    if command != "compare" or HINTED[trace] == "mode":  # compare names no width picked
        assert any(h in everything for h in PICK_HINTS), "no group-picking hint to check"
    refused = named(everything, command) - accepted(command)
    if command in ("breakdown", "report", "compare"):
        refused -= WHATIF_REASON_INPUTS
    assert not refused, f"{command} names options it refuses: {sorted(refused)}"


@pytest.mark.parametrize(("trace", "option", "value"), [
    ("capture-hf-assisted", "--width", "4"),
    ("workload-dense-compile", "--mode", "graph"),
])  # fmt: skip
def test_breakdown_and_kernels_pick_the_group_as_whatif_does(trace, option, value):
    path = str(T / trace)
    whatif = verifyprof("whatif", path, option, value, "--json")
    breakdown = verifyprof("breakdown", path, option, value, "--json")
    kernels = verifyprof("kernels", path, option, value, "--json")
    for done in (whatif, breakdown, kernels):
        assert done.returncode == 0, done.stderr
    verdict = json.loads(whatif.stdout)["verdict"]
    assert json.loads(breakdown.stdout)["verdict"] == verdict
    default = json.loads(verifyprof("whatif", path, "--json").stdout)["verdict"]
    assert verdict != default  # the option chose another group than the default one
    group = json.loads(kernels.stdout)["group"]
    if option == "--mode":
        assert group["mode"] == value
    else:
        assert f"tokens={value}" in group["variant"].split()
    report = verifyprof("report", path, option, value, "--json")
    compared = verifyprof("compare", path, path, option, value, "--json")
    assert report.returncode == 0 and compared.returncode == 0, report.stderr + compared.stderr
    assert json.loads(report.stdout)["verdict"] == verdict
    before = json.loads(compared.stdout)["before"]
    assert before["mode"] == value if option == "--mode" else before["width"] == int(value)


def test_kernels_refuses_a_width_with_another_choice_of_steps():
    done = verifyprof("kernels", str(T / "capture-hf-assisted"), "--all", "--width", "4")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "verifyprof: error: --width picks the verdict's step group: not with --all"
    ]


@pytest.mark.parametrize("command", ["breakdown", "kernels", "whatif", "report", "compare"])
@pytest.mark.parametrize(("trace", "option", "value", "there"), [
    ("capture-hf-assisted", "--width", "7", "no verify steps of width 7 (the breakdown has widths"),
    ("workload-dense-eager", "--mode", "graph", "no verify steps in graph mode (the breakdown has"),
])  # fmt: skip
def test_a_width_or_mode_no_group_has_is_one_line_naming_those_there_are(
    command, trace, option, value, there
):
    args = {"report": ["--json"], "compare": [str(T / trace)]}.get(command, [])
    done = verifyprof(command, str(T / trace), *args, option, value)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and there in lines[0], lines


def load_rows(text: str) -> list[list[str]]:
    """The load-curve tables' rows, as words: from the rule under a "Load curve" title to the
    first line that is no row."""
    rows, state = [], "out"
    for line in text.splitlines():
        if line.startswith("Load curve,"):  # today's (the curve after the plan's fixes follows)
            state = "title"
        elif state == "title" and set(line.strip()) == {"─"}:
            state = "rows"
        elif state == "rows" and re.match(r"^\s*\d+\s", line):
            rows.append(line.split())
        elif state == "rows":
            state = "out"
    return rows


def test_the_load_curve_keeps_its_numbers_whole_in_an_80_column_pipe():
    path = str(T / "workload-dense-eager")
    narrow = verifyprof("whatif", path, "--details", env={"COLUMNS": "80"})
    wide = verifyprof("whatif", path, "--details", env={"COLUMNS": "200"})
    assert narrow.returncode == wide.returncode == 0
    rows = load_rows(narrow.stdout)
    data = json.loads(verifyprof("whatif", path, "--json").stdout)["load_curve"]
    assert len(rows) == sum(len(c["rows"]) for c in data["contexts"]) > 0
    assert rows == load_rows(wide.stdout)
    for row, want in zip(rows, (r for c in data["contexts"] for r in c["rows"])):
        gain = want["best_tokens_per_s"] / want["plain_tokens_per_s"] - 1
        basis = next(i for i, word in enumerate(row) if word.isalpha())  # the basis column
        assert row[0] == str(want["batch"]) and row[basis - 1] == f"{gain:+.0%}"
        words = {"interpolated": "interp", "extrapolated": "extrap"}
        assert row[basis] == words.get(want["basis"], want["basis"])
        if want["basis"] != "measured":  # its band, whole
            assert row[basis + 1] == f"+/-{want['band']:.0%}"
    commands = ("--", "no --", "verifyprof ")  # printed whole on their own lines, to be copied
    lines = [line for line in narrow.stdout.splitlines() if not line.strip().startswith(commands)]
    assert max(len(line) for line in lines) <= 80


@pytest.mark.parametrize("command", ["whatif", "report", "compare"])  # breakdown: whole trace
def test_every_file_failing_is_one_line_naming_them(command):
    path = str(T / "two-processes-one-gpu")
    args = {"report": [path, "--json"], "compare": [path, path]}.get(command, [path])
    done = verifyprof(command, *args)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("verifyprof: error: "), lines
    assert "node-a.sqlite.gz" in lines[0] and "node-b.sqlite.gz" in lines[0]
    assert "no range is a step" in lines[0] and "skipped" not in lines[0]


def test_an_empty_output_path_is_named_as_empty(tmp_path):
    done = verifyprof("report", str(T / "workload-dense-eager"), "-o", "")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "verifyprof: error: report: -o: an empty path (give a file name)"
    ]


@pytest.mark.parametrize("args", [
    ["report", "TRACE", "-o", "A", "-o", "B"],
    ["report", "TRACE", "--out=A", "-o", "B"],
    ["breakdown", "TRACE", "--csv", "A", "--csv", "B"],
])  # fmt: skip
def test_an_output_option_given_twice_is_refused_writing_nothing(args, tmp_path):
    a, b = tmp_path / "a.out", tmp_path / "b.out"
    subst = {"TRACE": str(T / "workload-dense-eager"), "A": str(a), "B": str(b)}
    args = [re.sub("|".join(subst), lambda m: subst[m.group(0)], x) for x in args]
    done = verifyprof(*args)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "given twice" in lines[0] and str(b) in lines[0], lines
    assert list(tmp_path.iterdir()) == []
