"""The CLI as a user runs it, in a real process: its first output comes before the analysis
loads, it hands the GIL between its threads sooner than Python does, and it ends once its output
is written, without tearing the interpreter down."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PUBLIC, REPO

from verifyprof.contracts.plumbing import threads

EXPORT = PUBLIC / "nsys" / "flameox_cudagraph_rtx3060_nsys2025.5.sqlite"  # real, not gzipped


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join([*extra.pop("first", "").split(os.pathsep), str(REPO)]).strip(os.pathsep)
    return {**os.environ, "PYTHONPATH": path, "TERM": "xterm", "COLUMNS": "100", **extra}


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/PID/maps")
def test_the_status_line_is_on_the_terminal_before_pandas_is_loaded():
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "verifyprof.cli", "breakdown", str(EXPORT)],
        stdout=subprocess.DEVNULL,
        stderr=slave,
        env=_env(),
        cwd=REPO,
    )
    os.close(slave)
    try:
        ready, _, _ = select.select([master], [], [], 120)
        assert ready, "nothing written to the terminal"
        loaded = Path(f"/proc/{proc.pid}/maps").read_text()  # the libraries mapped by then
        first = os.read(master, 4096)
        while b"breaking down" not in first and select.select([master], [], [], 120)[0]:
            first += os.read(master, 4096)  # the cursor hidden, then the line
    finally:
        proc.kill()
        proc.wait()
        os.close(master)
    assert b"breaking down" in first
    assert "/pandas/" not in loaded and "/pyarrow/" not in loaded


def _hooked(tmp_path: Path) -> Path:
    """A ``sitecustomize`` that says on stderr when Python's exit handlers run and when a
    module-level object is freed (the interpreter's teardown)."""
    (tmp_path / "sitecustomize.py").write_text(
        "import atexit, sys\n"
        "class _Freed:\n"
        "    def __del__(self):\n"
        "        sys.__stderr__.write('torn down\\n')\n"
        "KEPT = _Freed()\n"
        "atexit.register(lambda: sys.__stderr__.write('exit handlers ran\\n'))\n"
    )
    return tmp_path


@pytest.mark.parametrize(
    ("argv", "code", "stdout"),
    [(["--version"], 0, "verifyprof "), (["breakdown", "/no/such/trace"], 2, "")],
    ids=["success", "error"],
)
def test_the_cli_process_runs_its_exit_handlers_keeps_its_code_and_skips_the_teardown(
    tmp_path, argv, code, stdout
):
    done = subprocess.run(
        [sys.executable, "-m", "verifyprof.cli", *argv],
        capture_output=True,
        text=True,
        env=_env(first=str(_hooked(tmp_path))),
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == code
    assert done.stdout.startswith(stdout)
    assert "exit handlers ran" in done.stderr
    assert "torn down" not in done.stderr


def test_a_program_calling_main_exits_as_python_does(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from verifyprof.cli import main; main()", "--version"],
        capture_output=True,
        text=True,
        env=_env(first=str(_hooked(tmp_path))),
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0
    assert "exit handlers ran" in done.stderr and "torn down" in done.stderr


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="counts /proc/self/task")
def test_the_map_loads_numpy_with_one_blas_thread_and_leaves_the_environment_as_it_was():
    probe = (
        "import os; from verifyprof.cli.args import _numpy_with_one_blas_thread as load; load();"
        " print(len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS'))"
    )
    env = {k: v for k, v in _env().items() if k != "OPENBLAS_NUM_THREADS"}
    for given, seen in ((None, "None"), ("2", "2")):  # one the user set is theirs
        done = subprocess.run(
            [sys.executable, "-c", probe],
            capture_output=True,
            text=True,
            env=env if given is None else {**env, "OPENBLAS_NUM_THREADS": given},
            cwd=REPO,
            timeout=120,
        )
        threads, variable = done.stdout.split()
        assert variable == seen, done.stderr
        assert given is not None or threads == "1"  # no BLAS thread beside this one


def _collections_counted(tmp_path: Path) -> Path:
    """A ``sitecustomize`` that counts the collector's runs and says, as the process exits,
    whether the collector is on, how many objects are frozen and how many runs there were, and
    the switch interval."""
    (tmp_path / "sitecustomize.py").write_text(
        "import atexit, gc, sys\n"
        "RUNS = [0]\n"
        "def count(phase, info):\n"
        "    RUNS[0] += phase == 'stop'\n"
        "gc.callbacks.append(count)\n"
        "atexit.register(lambda: sys.__stderr__.write(\n"
        "    f'collector {gc.isenabled()} {gc.get_freeze_count()} {RUNS[0]}"
        " {sys.getswitchinterval()}\\n'))\n"
    )
    return tmp_path


def test_the_cli_process_loads_its_modules_without_collecting_and_switches_threads_sooner(
    tmp_path,
):
    done = subprocess.run(
        [sys.executable, "-m", "verifyprof.cli", "breakdown", str(EXPORT), "--whole-trace"],
        capture_output=True,
        text=True,
        env=_env(first=str(_collections_counted(tmp_path))),
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    enabled, frozen, runs, switch = done.stderr.split("collector ")[-1].split()
    assert enabled == "True"  # never left off
    assert int(frozen) > 50_000  # typer, pandas and the analysis: frozen once loaded
    assert int(runs) < 120  # ~230 when the collector looked at every module as it loaded
    assert float(switch) == threads.SWITCH_S < sys.getswitchinterval()  # Python's own: 5 ms


def _two_ranks(folder: Path) -> Path:
    """Two rank files of the HTA A100 trace: a map that forks its workers (and loads the model
    while they run), where the CLI's process pauses its collector."""
    from test_parallel import rank_file

    folder.mkdir()
    source = PUBLIC / "kineto" / "hta_nccl_data_a100_rank0of2.json.gz"
    for rank in (0, 1):
        rank_file(source, folder / f"run-TP-{rank}.trace.json.gz", rank, rank * 1_000_000)
    return folder


MAPPING_PROGRAM = (
    "import gc, sys\n"
    "import verifyprof.cli\n"
    "from verifyprof import pipeline\n"
    "from verifyprof.pipeline.parallel import ParallelOptions\n"
    "pipeline.breakdown([sys.argv[-1]], whole_trace=True, parallel=ParallelOptions(workers=2))\n"
    "print(gc.isenabled(), gc.get_freeze_count(), sys.getswitchinterval())\n"
)


@pytest.mark.parametrize("started", ["-c", "-m", "-m, the CLI's -m among its arguments"])
def test_a_program_importing_the_cli_keeps_its_collector_as_it_set_it(tmp_path, started):
    """Run as ``python -c`` or as ``python -m tool`` (whose ``sys.argv[0]`` is ``-m`` while its
    package imports verifyprof), a program's map forks workers and loads the model as the CLI's
    does: its collector stays on, none of its objects are frozen, its switch interval is its
    own."""
    ranks = _two_ranks(tmp_path / "ranks")
    if started.startswith("-m"):
        (tmp_path / "tool").mkdir()
        (tmp_path / "tool" / "__init__.py").write_text(MAPPING_PROGRAM)
        (tmp_path / "tool" / "__main__.py").write_text("")
        forwarded = ["-m", "verifyprof.cli"] if "among" in started else []  # a launcher's
        argv = [sys.executable, "-m", "tool", *forwarded, str(ranks)]
    else:
        argv = [sys.executable, "-c", MAPPING_PROGRAM, str(ranks)]
    done = subprocess.run(
        argv, capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=120
    )
    assert done.stdout.split() == ["True", "0", str(sys.getswitchinterval())], done.stderr


def test_the_cli_parses_its_options_without_loading_pydantic():
    """typer 0.29 coerces every option through a pydantic TypeAdapter: the import and the
    adapters doubled the start-up before the first output (bench/README, typer's versions);
    pyproject keeps typer below it."""
    probe = (
        "import sys\n"
        "sys.argv = ['verifyprof', 'breakdown', 'no-such-trace.sqlite', '--json']\n"
        "from verifyprof import cli\n"
        "try:\n"
        "    cli.main()\n"
        "except SystemExit as done:\n"
        "    print(done.code, 'pydantic' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=_env(), cwd=REPO,
        timeout=120,
    )  # fmt: skip
    assert done.stdout.split() == ["2", "False"], done.stderr
