"""Every command's ``--help`` tells the truth at 80 columns (issue 44): no word broken across two
lines, every bundled model and hardware file named where the help lists them, no option named
that the command it names does not have, ``--quiet`` one meaning everywhere, one spelling of the
usage line's arguments; and the README's synopses list exactly each command's options."""

from __future__ import annotations

import re

import pytest
from cli_helpers import REPO, verifyprof

from verifyprof.cli import _command

COMMANDS = _command().commands
DATA = REPO / "verifyprof" / "data"


def help_of(command: str, columns: int) -> str:
    """``verifyprof COMMAND --help`` as a user sees it at 80 columns; wider, the same help laid
    out unwrapped (click's help never runs past 80 columns, whatever the terminal)."""
    if columns <= 80:
        ran = verifyprof(command, "--help", env={"COLUMNS": str(columns)})
        assert ran.returncode == 0, ran.stderr
        return ran.stdout
    group, cmd = _command(), COMMANDS[command]
    root = group.context_class(group, info_name="verifyprof")
    wide = dict(terminal_width=columns, max_content_width=columns)
    return cmd.get_help(cmd.context_class(cmd, info_name=command, parent=root, **wide))


def options_of(command: str) -> set[str]:
    return {
        opt
        for p in COMMANDS[command].params
        if p.param_type_name == "option"
        for opt in p.opts + p.secondary_opts
    }


def option_help(text: str, option: str) -> str:
    """The help of one option: its line and the indented lines that continue it."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith(option + " "))
    out = [lines[at]]
    for line in lines[at + 1 :]:
        if line.strip().startswith("-") or not line.startswith(" " * 8):
            break
        out.append(line)
    return " ".join(" ".join(out).split())


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_word_of_the_help_is_broken_across_lines_at_80_columns(command):
    narrow, wide = help_of(command, 80), help_of(command, 4000)
    assert max(len(line) for line in narrow.splitlines()) <= 80
    broken = [w for w in narrow.split() if w not in set(wide.split())]
    assert broken == [], broken  # e.g. "ver" "ify", or "what-" "if"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_the_help_names_exists_in_the_command_it_names(command):
    text = re.sub(r'"[^"]*"', "", help_of(command, 4000))  # a quoted example's own options
    # --NAME=VALUE is a program's own option in an example (--load-option --speculate-k=...)
    named = re.findall(r"(?:\b(" + "|".join(COMMANDS) + r") )?(--[a-z][\w-]*)(?![\w=-])", text)
    missing = [
        f"{other or command} {opt}"
        for other, opt in named
        if opt not in options_of(other or command) | {"--help"}
    ]
    assert missing == []  # capture's --batches once sent users to a "whatif --out"


@pytest.mark.parametrize(
    "option,folder,skip",
    [("--model", "models", ()), ("--hardware", "hardware", ("links",))],
)
def test_the_help_names_every_bundled_data_file(option, folder, skip):
    stems = sorted(p.stem for p in (DATA / folder).glob("*.toml") if p.stem not in skip)
    assert len(stems) >= 5
    for command in sorted(c for c in COMMANDS if option in options_of(c)):
        words = re.findall(r"[\w.-]+", option_help(help_of(command, 4000), option))
        assert [s for s in stems if s not in words] == [], command


def test_quiet_means_the_same_in_every_command_that_reads_a_trace():
    readers = ("breakdown", "kernels", "whatif", "compare", "report")
    helps = {c: option_help(help_of(c, 4000), "--quiet") for c in readers}
    assert len(set(helps.values())) == 1, helps


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_usage_names_arguments_in_capitals_without_doubled_dots(command):
    usage = help_of(command, 4000).splitlines()[0]
    arguments = usage.split("[OPTIONS]", 1)[1].split()
    assert arguments and all(re.fullmatch(r"[{\[][A-Z]+[}\]](\.\.\.)?", a) for a in arguments), (
        usage
    )


def test_gate_shows_its_value_as_the_percent_its_help_names():
    assert option_help(help_of("compare", 4000), "--gate").startswith("--gate PCT ")


def test_quiet_compare_and_report_say_nothing_but_what_was_asked(tmp_path):
    trace = str(REPO / "traces" / "workload-dense-eager")
    page = tmp_path / "page.html"
    done = verifyprof("report", trace, "-o", str(page), "--quiet")
    assert done.returncode == 0 and page.exists()
    assert done.stdout == "" and done.stderr == ""
    rows = tmp_path / "steps.csv"
    done = verifyprof("breakdown", trace, "--csv", str(rows), "--quiet")
    assert done.returncode == 0 and rows.exists()
    assert "verify" in done.stdout and done.stderr == ""  # the table, no "wrote" line
    done = verifyprof("compare", trace, trace, "--quiet")
    assert done.returncode == 0 and "verify" in done.stdout


README = (REPO / "README.md").read_text()
SYNOPSES = re.search(r"## Commands\n\n```bash\n(.*?)\n```", README, re.S).group(1)


def synopsis(command: str) -> str:
    """The README's synopsis lines of ``command``: its lines and their continuations."""
    out, mine = [], False
    for line in SYNOPSES.splitlines():
        if line.startswith("verifyprof "):
            mine = line.split()[1] == command
        if mine:
            out.append(line)
    return "\n".join(out)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_readme_synopsis_lists_exactly_the_commands_options(command):
    text = re.sub(r'"[^"]*"| -- .*', "", synopsis(command))  # examples' and programs' options
    shown = set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", text))
    params = [p.opts for p in COMMANDS[command].params if p.param_type_name == "option"]
    left_out = [opts[-1] for opts in params if not shown & set(opts)]  # -o or --out: either
    assert left_out == [] and sorted(shown - options_of(command)) == []
