"""`verifyprof hooks`: what a capture would wrap, checked in the user's own Python (the real entry,
`cli.main`, in-process, and fresh `python -m verifyprof.cli` processes of this checkout; the console
script's exit 1 for a missing target: tests/test_cli_smoke.py).

The status, one rule: 1 when a target cannot be hooked in this Python (missing: a target the user
named whose function, module or package is not there, or one in the program's __main__;
unsupported: not a plain function), 0 otherwise: a preset's targets this Python lacks, even its
whole server, are information.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from cli_helpers import REPO, Ran, verifyprof

from verifyprof.capture.hooks import api as hook_api


@pytest.fixture(autouse=True)
def no_hooks_before_or_after():
    """`hooks` installs what it checks and leaves it installed, as the command's own process ends
    right after; in-process each test starts and ends with none, like that fresh process."""
    hook_api.uninstall()
    yield
    hook_api.uninstall()


def run(*args: str) -> Ran:
    return verifyprof("hooks", *args)


def test_workload_preset_targets_all_exist_in_this_checkout():
    done = run("workload", "--json")
    assert done.returncode == 0, done.stderr
    states = {s["target"]: s["state"] for s in json.loads(done.stdout)}
    assert states["verifyprof.workload.runner:Workload.verify"] == "patched"
    assert set(states.values()) == {"patched"}


def test_a_user_target_that_does_not_exist_is_reported_missing_with_exit_1():
    done = run("json:no_such_function=verify", "--json")
    assert done.returncode == 1
    (status,) = json.loads(done.stdout)
    assert status["state"] == "missing" and "no_such_function" in status["detail"]


def test_a_malformed_hook_spec_is_a_one_line_error():
    done = run("not-a-target=verify")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


MYMOD = "def model_forward(input_ids, cache=None):\n    return input_ids\n"


def run_as_console_script(*args: str, cwd) -> subprocess.CompletedProcess:
    """``verifyprof hooks`` as the installed console script runs: ``-P`` keeps the current
    directory off ``sys.path``, as a script in the environment's bin/ has it. This checkout first
    on ``PYTHONPATH``: the verifyprof under test, not one installed from another checkout."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, "-P", "-m", "verifyprof.cli", "hooks", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": path, "COLUMNS": "200"},
    )


SERVER_PRESET = """
name = "server"
description = "a server this Python does not have"

[[hook]]
phase = "verify"
targets = ["notinstalledserver.runner:Runner.verify", "notinstalledserver.old:Runner.verify"]
"""


def test_a_preset_whose_server_is_not_installed_here_is_information_with_exit_0(tmp_path):
    (tmp_path / "server.toml").write_text(SERVER_PRESET)
    done = run_as_console_script("./server.toml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "2 preset targets not checked: the package 'notinstalledserver' is not installed"
        in done.stdout
    )
    assert "missing" not in done.stdout
    states = json.loads(run_as_console_script("./server.toml", "--json", cwd=tmp_path).stdout)
    assert {s["state"] for s in states} == {"absent"}


@pytest.mark.parametrize("with_program", [False, True], ids=["alone", "with-program"])
def test_a_named_target_whose_package_is_not_installed_is_missing_with_exit_1(
    tmp_path, with_program
):
    (tmp_path / "script.py").write_text("print('ran')\n")
    program = ["--", "python", "script.py"] if with_program else []
    done = run_as_console_script("notinstalledmod:step=verify", *program, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    where = "the program's folder" if with_program else "the current folder"
    assert f"missing notinstalledmod:step: notinstalledmod is neither in {where} nor installed" in (
        done.stdout
    )
    assert "not checked" not in done.stdout
    (status,) = json.loads(
        run_as_console_script(
            "notinstalledmod:step=verify", "--json", *program, cwd=tmp_path
        ).stdout
    )
    assert status["state"] == "missing"


def test_a_named_target_fails_the_check_beside_a_preset_whose_server_is_not_installed(tmp_path):
    (tmp_path / "server.toml").write_text(SERVER_PRESET)
    done = run_as_console_script("./server.toml,notinstalledmod:step=verify", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "2 preset targets not checked" in done.stdout
    assert "missing notinstalledmod:step" in done.stdout


def test_a_named_target_that_is_not_a_plain_function_is_unsupported_with_exit_1(tmp_path):
    (tmp_path / "mymod.py").write_text("async def step(x):\n    return x\n")
    done = run_as_console_script("mymod:step=verify", "--json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    (status,) = json.loads(done.stdout)
    assert status["state"] == "unsupported"


def test_a_module_missing_from_an_installed_package_is_not_called_a_package_not_installed(
    tmp_path,
):
    done = run_as_console_script("json.nosuchsub:step=verify", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    text = " ".join(done.stdout.split())
    assert "missing json.nosuchsub:step: cannot import json.nosuchsub" in text
    assert "not installed" not in text


def test_the_help_says_what_each_exit_status_means():
    done = run("--help")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "Exit 1 when a target cannot be hooked in this Python" in text
    assert "Exit 0 otherwise: a preset's targets this Python lacks" in text
    assert "Exit 2: bad input" in text


def test_a_target_in_a_module_of_the_current_folder_is_found(tmp_path):
    (tmp_path / "mymod.py").write_text(MYMOD)
    done = run_as_console_script("mymod:model_forward=verify", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [(s["target"], s["state"]) for s in json.loads(done.stdout)] == [
        ("mymod:model_forward", "patched")
    ]


def test_a_target_beside_the_program_script_is_found_from_another_folder(tmp_path):
    program = tmp_path / "prog"
    program.mkdir()
    (program / "mymod.py").write_text(MYMOD)
    (program / "script.py").write_text("import mymod\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = run_as_console_script(
        "mymod:model_forward=verify",
        "--json",
        "--",
        "python",
        "-u",
        str(program / "script.py"),
        cwd=elsewhere,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["state"] == "patched"
    alone = run_as_console_script("mymod:model_forward=verify", "--json", cwd=elsewhere)
    assert alone.returncode == 1 and "cannot import mymod" in json.loads(alone.stdout)[0]["detail"]


def test_a_target_in_the_programs_main_script_is_reported_unhookable_without_running_it(tmp_path):
    program = tmp_path / "prog"
    program.mkdir()
    marker = tmp_path / "ran"
    (program / "script.py").write_text(
        f"def step(x):\n    return x\n\nopen({str(marker)!r}, 'w').close()\n"
    )
    done = run_as_console_script(
        "script:step=verify", "--json", "--", "python", str(program / "script.py"), cwd=tmp_path
    )
    assert done.returncode == 1, done.stderr
    (status,) = json.loads(done.stdout)
    assert status["state"] == "missing" and "runs as __main__" in status["detail"]
    assert not marker.exists()  # the check never imported (ran) the script


def test_a_target_in_the_module_run_with_dash_m_is_reported_unhookable(tmp_path):
    (tmp_path / "tool.py").write_text("def step(x):\n    return x\n")
    done = run_as_console_script(
        "tool:step=verify", "--json", "--", "python", "-m", "tool", cwd=tmp_path
    )
    assert (
        done.returncode == 1
        and "tool is the program's main module" in json.loads(done.stdout)[0]["detail"]
    )
    other = run_as_console_script(
        "tool:step=verify", "--json", "--", "python", "-m", "other", cwd=tmp_path
    )
    assert other.returncode == 0 and json.loads(other.stdout)[0]["state"] == "patched"


def test_a_package_run_with_dash_m_keeps_its_package_hookable_and_its_main_unhookable(tmp_path):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("def step(x):\n    return x\n")
    marker = tmp_path / "ran"
    (tmp_path / "app" / "__main__.py").write_text(
        f"def go(x):\n    return x\n\nopen({str(marker)!r}, 'w').close()\n"
    )
    done = run_as_console_script(
        "app:step=verify,app.__main__:go=draft", "--json", "--", "python", "-m", "app", cwd=tmp_path
    )
    states = {s["target"]: s["state"] for s in json.loads(done.stdout)}
    assert states == {"app:step": "patched", "app.__main__:go": "missing"} and done.returncode == 1
    assert not marker.exists()


def test_the_table_gives_a_missing_targets_whole_reason_at_80_columns(tmp_path):
    (tmp_path / "script.py").write_text("def step(x):\n    return x\n")
    done = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "verifyprof.cli",
            "hooks",
            "script:step=verify,json:nope=draft",
            "--",
            "python",
            "script.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert done.returncode == 1, done.stderr
    text = " ".join(done.stdout.split())  # the reason wraps over lines
    assert done.stderr == ""  # no HookWarning with its source line: each is a row of the report
    assert "move the function into a module the program imports and hook it there" in text
    assert "missing json:nope: json has no attribute 'nope'" in text
    assert max(len(line) for line in done.stdout.splitlines()) <= 80


def test_a_function_missing_from_a_module_the_script_imports_is_named_as_missing(tmp_path):
    (tmp_path / "helper.py").write_text("def f():\n    pass\n")
    (tmp_path / "script.py").write_text("import helper\n")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    done = run_as_console_script(
        "helper:nosuch=draft,app:main=verify", "--json", "--", "python", "script.py", cwd=tmp_path
    )
    details = {s["target"]: s["detail"] for s in json.loads(done.stdout)}
    assert (
        details["helper:nosuch"] == "helper has no attribute 'nosuch'"
    )  # not Python's "circular import" guess
    assert (
        details["app:main"]
        == "app has no attribute 'main' (one in its __main__.py: app.__main__:main)"
    )
