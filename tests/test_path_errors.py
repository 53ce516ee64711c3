"""Paths the user names that cannot be read, searched or named, and Ctrl-C at any instant of the
CLI's start: one line each, from the one place that words them, never a traceback.

The permission cases run verifyprof as a real process without the capabilities that let root
read anything (``setpriv --bounding-set``): as root the same files would simply be read, and a
skipped test would prove nothing."""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import site
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import forked_cli
import pytest
from conftest import PUBLIC, REPO

MOCK = PUBLIC / "nsys" / "nsysai_mock_rtx3080_nsys2026.1.sqlite"
KINETO = PUBLIC / "kineto" / "hta_nccl_data_a100_rank0of2.json.gz"


def _unprivileged() -> list[str]:
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    assert setpriv, "root runs these tests through setpriv (util-linux), which is missing"
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``verifyprof ARGS`` as a process that file permissions apply to, root or not."""
    return subprocess.run(
        [*_unprivileged(), sys.executable, "-m", "verifyprof.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        timeout=120,
    )


def one_line(done: subprocess.CompletedProcess, *fragments: str) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("verifyprof: error: "), done.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def locked(tmp_path):
    """Restores the modes the tests take away, so that pytest can remove the folder."""
    taken: list[Path] = []

    def lock(path: Path, mode: int) -> Path:
        taken.append(path)
        path.chmod(mode)
        return path

    yield lock
    for path in taken:
        path.chmod(0o755)


def test_a_trace_that_cannot_be_read_is_one_line(tmp_path, locked):
    trace = tmp_path / "mock.sqlite"
    shutil.copy(MOCK, trace)
    locked(trace, 0)
    one_line(run("kernels", str(trace)), f"{trace}: permission denied: it cannot be read")


@pytest.mark.parametrize("command", ["kernels", "breakdown"])
def test_a_trace_in_a_folder_that_cannot_be_searched_names_the_folder(tmp_path, locked, command):
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(MOCK, folder / "mock.sqlite")
    locked(folder, 0o600)
    one_line(
        run(command, str(folder / "mock.sqlite")),
        f"permission denied: the folder {folder} cannot be searched",
    )


def test_a_capture_folder_that_cannot_be_searched_is_one_line(tmp_path, locked):
    folder = tmp_path / "cap"
    folder.mkdir()
    shutil.copy(MOCK, folder / "capture.sqlite")
    locked(folder, 0o600)
    one_line(run("breakdown", str(folder)), f"the folder {folder} cannot be searched")


@pytest.mark.parametrize("mode", [0o300, 0], ids=["searchable-not-listable", "mode-0"])
def test_a_kineto_rank_folder_that_cannot_be_listed_is_one_line(tmp_path, locked, mode):
    folder = tmp_path / "ranks"
    folder.mkdir()
    shutil.copy(KINETO, folder / KINETO.name)
    locked(folder, mode)
    line = one_line(run("breakdown", str(folder), "--whole-trace"), str(folder))
    assert "permission denied" in line


def test_a_name_over_255_bytes_is_one_line(tmp_path):
    name = "é" * 150  # 300 bytes of UTF-8
    one_line(
        run("kernels", str(tmp_path / name / "trace.sqlite")),
        "file name too long",
        "is 300 bytes, more than 255",
    )


@pytest.mark.parametrize("where", ["trace", "output"])
def test_a_loop_of_symlinks_is_one_line(tmp_path, where):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    if where == "trace":
        one_line(run("kernels", str(tmp_path / "a")), "symlink loop")
    else:
        one_line(
            run("breakdown", str(MOCK), "--whole-trace", "--csv", str(tmp_path / "a")),
            "symbolic link loop",
        )


def test_a_cache_folder_that_cannot_be_searched_is_blamed_on_the_cache(tmp_path, locked):
    """As root too: a subprocess, so it runs whoever runs the suite."""
    trace = tmp_path / "in" / "mock.sqlite.gz"
    trace.parent.mkdir()
    trace.write_bytes(gzip.compress(MOCK.read_bytes()))
    cache = tmp_path / "cache"
    cache.mkdir()
    locked(cache, 0)
    line = one_line(
        run("breakdown", str(trace), "--whole-trace", env={"VERIFYPROF_CACHE": str(cache)}),
        str(cache),
    )
    assert line.startswith(f"verifyprof: error: {trace}: cannot write its derived copy")


@pytest.mark.parametrize("variable", ["HOME", "VERIFYPROF_DATA_DIR"])
def test_a_user_data_folder_that_cannot_be_searched_is_one_line_and_version_still_works(
    tmp_path, locked, variable
):
    """A service user's HOME, ``sudo -u`` with HOME kept: the user ranges file was probed at
    import, so every command, ``--version`` included, was a 28-line traceback."""
    config = tmp_path / ".config"
    config.mkdir()
    locked(config, 0)
    env = {"HOME": str(tmp_path)} if variable == "HOME" else {variable: str(config / "vp")}
    env_clear = {"VERIFYPROF_DATA_DIR": ""} if variable == "HOME" else {}
    version = run("--version", env={**env, **env_clear})
    assert version.returncode == 0 and version.stdout.startswith("verifyprof "), version.stderr
    line = one_line(
        run("kernels", str(MOCK), env={**env, **env_clear}),
        f"permission denied: the folder {config} cannot be searched",
    )
    assert "VERIFYPROF_DATA_DIR" in line  # what to do


# --- Ctrl-C while the CLI starts ---------------------------------------------------------------

# The console script's own lines, with a SIGINT sent to itself when ``MODULE`` is first looked
# for: an instant chosen by what is imported, not by a timer.
START = textwrap.dedent("""
    import os, signal, sys

    class Interrupt:
        def find_spec(self, name, path=None, target=None):
            if name == MODULE:
                sys.meta_path.remove(self)
                os.kill(os.getpid(), signal.SIGINT)
            return None

    MODULE = sys.argv[1]
    sys.meta_path.insert(0, Interrupt())
    sys.argv = ["verifyprof", *sys.argv[2:]]
    from verifyprof.cli import main
    sys.exit(main())
""")


@pytest.mark.parametrize(
    "module",
    ["numpy", "typer", "verifyprof.cli.capture_cmds", "verifyprof.pipeline"],
    ids=["numpy", "typer", "cli-commands", "in-the-command"],
)
def test_ctrl_c_at_any_instant_of_the_start_is_one_line_exit_130(module):
    done = subprocess.run(
        [sys.executable, "-c", START, module, "kernels", str(MOCK)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert (done.returncode, done.stderr) == (130, "verifyprof: interrupted\n")
    assert done.stdout == ""


# Every module the CLI imports, in the order it first looks for them (the interpreter's own
# start-up excluded: those are loaded before the console script runs).
IMPORT_ORDER = textwrap.dedent("""
    import os, signal, sys  # as START: what it has loaded is never looked for again

    class Record:
        def find_spec(self, name, path=None, target=None):
            print(name)
            return None

    sys.meta_path.insert(0, Record())
    import verifyprof.cli
""")


# No site start-up (``-S``, the packages on PYTHONPATH instead): the interpreter then loads only
# what it needs itself, as a lean installation does, so ``threading`` is the CLI's to import.
LEAN = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([str(REPO), *site.getsitepackages()]),
}


def cli_imports() -> list[str]:
    """The modules first looked for once ``verifyprof.cli`` runs, in order."""
    done = subprocess.run(
        [sys.executable, "-S", "-c", IMPORT_ORDER],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=LEAN,
        timeout=120,
    )
    order = done.stdout.split()
    return order[order.index("verifyprof.cli") + 1 :]


def test_ctrl_c_as_any_module_the_cli_imports_is_first_looked_for_is_one_line_exit_130():
    """The guard is the CLI's first statement: the first modules it imports (``threading``: a
    traceback from the project's own import before) and a spread of the rest (numpy, pandas,
    typer, the commands) each meet it."""
    order = cli_imports()
    assert len(order) > 50 and "threading" in order, order  # the CLI's imports were seen
    for module in [*order[:3], *order[3 :: len(order) // 8]]:
        done = subprocess.run(
            [sys.executable, "-S", "-c", START, module, "kernels", str(MOCK)],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=LEAN,
            timeout=120,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        assert (done.returncode, done.stderr, done.stdout) == (130, "verifyprof: interrupted\n", "")


# --- any name, any working directory: every command, every option that takes a name --------------
# The probe classes of issue 34, over what the CLI exposes: each command's options that take a
# path are read from the app itself, so a new one is probed without being listed here.

NAMES_PYTHON = sys.executable
BASE = {  # each command as it runs on the small mock trace; "{t}" the trace, "{o}" an output
    "breakdown": ["breakdown", "{t}", "--whole-trace"],
    "kernels": ["kernels", "{t}"],
    "whatif": ["whatif", "{t}", "--whole-trace", "--accept-len", "2"],
    "compare": ["compare", "{t}", "{t}", "--whole-trace"],
    "report": ["report", "{t}", "-o", "{o}", "--whole-trace"],
    "capture": ["capture", "--backend", "none", "--out", "{o}", "--", NAMES_PYTHON, "-c", "pass"],
    "hooks": ["hooks"],
}
# str options that take a name (a trace; a TOML file, where a name with a / or .toml is a path)
NAMED_BY_TEXT = {
    ("whatif", "--from"),
    ("report", "--compare"),
    ("whatif", "--model"),
    ("whatif", "--hardware"),
}
BASE_FOR = {  # where an option needs another run than its command's base one
    ("whatif", "--from"): ["whatif", "--whole-trace", "--accept-len", "2"],  # in place of {t}
    ("capture", "--prompts"): [  # a server capture's option
        *["capture", "--backend", "none", "--out", "{o}", "--port", "1"],
        *["--server-cmd", f"{NAMES_PYTHON} -m http.server"],
    ],
}


def _commands() -> dict[str, Any]:
    import typer

    from verifyprof.cli import app

    return typer.main.get_command(app).commands


def path_options() -> list[tuple[str, str]]:
    """(command, option) for every option of the CLI that takes a file or folder name."""
    from verifyprof.cli.args import _takes_path

    found = {
        (name, param.opts[0])
        for name, command in _commands().items()
        for param in command.params
        if param.param_type_name == "option" and _takes_path(param)
    }
    return sorted(found | NAMED_BY_TEXT)


def probe(command: str, option: str | None, name: str, trace: Path, out: Path) -> list[str]:
    """``command``'s base run with ``option`` given ``name`` (None: the trace argument is
    ``name``); an option the base run gives already gets ``name`` in place of its value."""
    args = [a.format(t=trace, o=out) for a in BASE_FOR.get((command, option), BASE[command])]
    if option is None:
        return [name if a == str(trace) else a for a in args]
    spellings = next(p.opts for p in _commands()[command].params if option in p.opts)
    at = next((i for i, a in enumerate(args) if a in spellings), None)
    if at is not None and args[at] != "--":
        args[at + 1] = name
        return args
    cut = args.index("--") if "--" in args else len(args)
    return [*args[:cut], option, name, *args[cut:]]


def run_names(args: list[str], cwd: Path, gone: bool = False) -> subprocess.CompletedProcess:
    """A real process (its standard streams as a terminal's: UTF-8, strict), in ``cwd``;
    ``gone``: ``cwd`` is removed by the process itself before verifyprof starts. Forked from a
    process that has imported the CLI (``forked_cli``): these runs are about names, not the
    interpreter's start."""
    return forked_cli.run(
        args,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), "VERIFYPROF_CACHE": str(cwd.parent / "c")},
        remove_cwd=gone,
        timeout=180,
    )


def assert_read_or_one_line(done: subprocess.CompletedProcess) -> str:
    """Read (exit 0, or 1: a capture or hooks saying what is missing) or refused in one line;
    never a traceback, and no name's raw bytes reach the terminal (ESC, a byte not UTF-8)."""
    text = (done.stdout + done.stderr).decode("utf-8")  # strict: a raw \377 fails here
    assert "Traceback" not in text and "\x1b" not in text, text[-3000:]
    if done.returncode not in (0, 1):
        lines = done.stderr.decode().strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, text[-3000:]
        assert lines[0].startswith("verifyprof: error: "), lines
    return text


ODD = os.fsdecode(b"odd\377\x1b[2J")  # a byte that is not UTF-8, and an escape sequence


@pytest.fixture
def names_dir(tmp_path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


@pytest.mark.parametrize(("command", "option"), path_options())
def test_a_name_of_any_bytes_given_to_any_option_is_read_or_one_line(names_dir, command, option):
    trace = names_dir / "mock.sqlite"
    shutil.copy(MOCK, trace)
    missing = str(names_dir / ODD / f"{ODD}.x")  # in a folder that does not exist
    done = run_names(probe(command, option, missing, trace, names_dir / "out"), names_dir)
    text = assert_read_or_one_line(done)
    if done.returncode == 2:
        assert "odd\\xff\\x1b[2J" in text  # named, escaped as every message escapes it


def named(form: str, folder: Path) -> Path:
    """The small mock trace (or a Kineto one, a breakdown JSON) under a name that is not UTF-8,
    in ``form``; "folder": a capture folder (the trace and a manifest) so named."""
    if form == "folder":
        (folder / ODD).mkdir()
        shutil.copy(MOCK, folder / ODD / "capture.sqlite")
        shutil.copy(REPO / "traces" / "capture-hf-assisted" / "manifest.json", folder / ODD)
        return folder / ODD
    source = {"kineto": KINETO, "json": REPO / "traces" / "capture-hf-assisted" / "breakdown.json"}
    trace = folder / f"{ODD}.{'json.gz' if form == 'kineto' else form}"
    data = source.get(form, MOCK).read_bytes()
    trace.write_bytes(gzip.compress(data) if form == "sqlite.gz" else data)
    return trace


@pytest.mark.parametrize("form", ["sqlite", "sqlite.gz", "kineto", "folder", "json"])
@pytest.mark.parametrize("command", [c for c in BASE if "{t}" in BASE[c]])
def test_a_trace_whose_name_is_not_utf8_is_read(names_dir, command, form):
    """Read in every form (a breakdown JSON by the commands that take one; a Kineto trace
    without steps, where --whole-trace does not apply, refused as any such trace is)."""
    trace = named(form, names_dir)
    args = probe(command, None, str(trace), trace, names_dir / f"{ODD}.html")
    done = run_names(args, names_dir)
    text = assert_read_or_one_line(done)
    assert done.returncode == 0 or form in ("kineto", "json"), text[-2000:]
    if command == "report" and done.returncode == 0:
        assert "wrote " + str(names_dir).replace("\\", "\\\\") + "/odd\\xff\\x1b[2J.html" in text


@pytest.mark.parametrize(("command", "option"), [(c, None) for c in BASE] + path_options())
def test_a_relative_name_in_a_deleted_working_directory_is_one_line(names_dir, command, option):
    """``mkdir gone && cd gone && rmdir ../gone``: an absolute trace is read, a relative name
    (here the option's, or the command's trace) is refused in one line saying why."""
    trace = names_dir.parent / "mock.sqlite"
    shutil.copy(MOCK, trace)
    out = names_dir.parent / "out.html"
    relative = option is not None or "{t}" in BASE[command]
    args = probe(command, option, "in/relative.x" if relative else str(trace), trace, out)
    done = run_names(args, names_dir, gone=True)
    text = assert_read_or_one_line(done)
    if relative or command == "capture":  # capture: its program would run in the deleted folder
        assert done.returncode == 2 and "working directory" in text, text
        assert "no longer exists (deleted)" in text, text
    else:
        assert done.returncode in (0, 1), text  # hooks: the installed packages still looked in


def test_a_glob_of_capture_folders_says_to_give_each_capture_not_to_compare(tmp_path):
    """Before, the folders were read as one run's ranks and refused as separate runs with a
    remedy for two runs ('compare A B'), where whatif takes several captures as arguments."""
    from cli_helpers import verifyprof

    runs = REPO / "bench" / "results" / "load_mha_h200"
    for name in ("C1", "C8"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "capture.sqlite.gz").symlink_to(runs / name / "capture.sqlite.gz")
        (tmp_path / name / "manifest.json").symlink_to(runs / name / "manifest.json")
    for command in ("whatif", "breakdown"):
        proc = verifyprof(command, str(tmp_path / "*"))
        assert proc.returncode == 2, proc.stderr
        (line,) = proc.stderr.splitlines()
        assert f"glob matches 2 capture folder(s) ({tmp_path / 'C1'}, {tmp_path / 'C8'})" in line
        assert "whatif CAP1 CAP2" in line and "compare" not in line
