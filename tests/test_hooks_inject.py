"""Hooks reach processes a server spawns: sitecustomize on PYTHONPATH and SGLang's plugin entry
point.

Everything runs for real in fresh interpreters: a multiprocessing *spawn* child (how SGLang
starts its scheduler/TP ranks), and plain subprocesses for the sitecustomize chaining and the
entry-point discovery SGLang's ``load_plugins()`` performs.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import textwrap
import tomllib
import venv
from pathlib import Path

import pytest

from verifyprof.capture.hooks import api as hooks

REPO = Path(__file__).resolve().parents[1]


def report_child_hooks(queue) -> None:
    """Runs in the spawned child: what the injected hooks did there."""
    import json as json_module

    from verifyprof.capture.hooks import api as child_hooks

    queue.put(
        {
            "pid": os.getpid(),
            "statuses": [s.to_json() for s in child_hooks.status()],
            "dumps_hooked": hasattr(json_module.dumps, "__verifyprof_hook__"),
            "dumps_works": json_module.dumps({"a": 1}) == '{"a": 1}',
        }
    )


def _spawn_with(env: dict[str, str], monkeypatch) -> dict:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=report_child_hooks, args=(queue,))
    child.start()
    try:
        report = queue.get(timeout=120)
    finally:
        child.join(timeout=60)
    assert child.exitcode == 0
    return report


def test_spawned_child_installs_the_hooks_from_the_injected_environment(tmp_path, monkeypatch):
    env = hooks.injection_env(
        ["sglang"], ["json:dumps=verify"], report_dir=tmp_path, environ=os.environ
    )
    report = _spawn_with(env, monkeypatch)
    assert report["dumps_hooked"] and report["dumps_works"]
    states = {s["target"]: s["state"] for s in report["statuses"]}
    assert states["json:dumps"] == "patched"
    assert (
        states["sglang.srt.model_executor.model_runner:ModelRunner.forward"] == "pending"
    )  # no SGLang here
    written = json.loads((tmp_path / f"hooks-{report['pid']}.json").read_text())
    assert {h["target"]: h["state"] for h in written["hooks"]} == states


def test_spawned_child_without_the_variable_has_no_hooks(monkeypatch):
    monkeypatch.delenv("VERIFYPROF_HOOKS", raising=False)
    env = hooks.injection_env(["sglang"], environ=os.environ)
    del env["VERIFYPROF_HOOKS"]
    report = _spawn_with(env, monkeypatch)
    assert report["statuses"] == [] and not report["dumps_hooked"]


def _python(
    code: str, env: dict[str, str], cwd: Path, python: str = sys.executable
) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("VERIFYPROF_", "PYTHONPATH"))}
    return subprocess.run(
        [python, "-c", textwrap.dedent(code)],
        env=clean | env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def python_without_verifyprof(tmp_path_factory) -> str:
    """This interpreter in a venv of its own: no site-packages of this one, so no verifyprof
    installed (a server's environment). This one may have verifyprof installed from another
    checkout (an editable install of the main one, seen from a git worktree), and a child
    importing that would test it, not this checkout."""
    home = tmp_path_factory.mktemp("bare-venv")
    venv.EnvBuilder(with_pip=False, symlinks=True).create(home)
    return str(home / "bin" / "python")


@pytest.fixture
def other_sitecustomize(tmp_path):
    """A pre-existing sitecustomize (as conda or a distro installs) that ours shadows."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text(
        textwrap.dedent("""
        import os
        with open(os.environ["MARKER"], "a") as f:
            f.write("ran\\n")
        CHAINED_VALUE = 42
    """)
    )
    return other


PROBE = """
    import json, sys
    hooked = "verifyprof.capture.hooks.api" in sys.modules
    print(json.dumps({"hooks_imported": hooked,
                      "dumps_hooked": hasattr(json.dumps, "__verifyprof_hook__"),
                      "verifyprof_from": getattr(sys.modules.get("verifyprof"), "__file__", None)}))
"""


def test_sitecustomize_chains_to_the_one_it_shadows_and_does_nothing_else_without_the_variable(
    tmp_path, other_sitecustomize
):
    marker = tmp_path / "marker"
    path = os.pathsep.join([str(hooks.INJECT_DIR), str(other_sitecustomize)])
    result = _python(PROBE, {"PYTHONPATH": path, "MARKER": str(marker)}, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert marker.read_text() == "ran\n"  # exactly once
    assert json.loads(result.stdout) == {
        "hooks_imported": False,
        "dumps_hooked": False,
        "verifyprof_from": None,
    }


def test_sitecustomize_installs_hooks_and_still_chains(
    tmp_path, other_sitecustomize, python_without_verifyprof
):
    marker = tmp_path / "marker"
    env = hooks.injection_env(
        [], ["json:dumps=verify"], environ={"PYTHONPATH": str(other_sitecustomize)}
    )
    result = _python(
        PROBE, env | {"MARKER": str(marker)}, cwd=tmp_path, python=python_without_verifyprof
    )
    assert result.returncode == 0, result.stderr
    assert marker.read_text() == "ran\n"
    probe = json.loads(result.stdout)
    assert probe["hooks_imported"] and probe["dumps_hooked"]
    # verifyprof is not installed for this interpreter: loaded from this checkout's package files
    assert Path(probe["verifyprof_from"]) == REPO / "verifyprof" / "__init__.py"


def test_sitecustomize_installs_its_own_copys_hooks_where_another_verifyprof_is_importable(
    tmp_path, python_without_verifyprof
):
    """A server's environment with another verifyprof (an older release) on its path: the hooks
    the capture injects are still this checkout's, read by this checkout's rules."""
    other = tmp_path / "site" / "verifyprof"
    (other / "capture" / "hooks").mkdir(parents=True)
    for folder in (other, other / "capture", other / "capture" / "hooks"):
        (folder / "__init__.py").write_text("")
    (other / "capture" / "hooks" / "api.py").write_text(
        "def install_from_env():\n    raise RuntimeError('the other copy was used')\n"
    )
    env = hooks.injection_env([], ["json:dumps=verify"], environ={"PYTHONPATH": str(other.parent)})
    result = _python(PROBE, env, cwd=tmp_path, python=python_without_verifyprof)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    probe = json.loads(result.stdout)
    assert probe["hooks_imported"] and probe["dumps_hooked"]
    assert Path(probe["verifyprof_from"]) == REPO / "verifyprof" / "__init__.py"


def test_bad_hooks_variable_warns_and_the_program_runs_on(tmp_path):
    env = {"PYTHONPATH": str(hooks.INJECT_DIR), "VERIFYPROF_HOOKS": "no_such_preset"}
    result = _python("print('host ok')", env, cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == "host ok\n"
    assert (
        "verifyprof: warning: hooks not installed: unknown hook preset 'no_such_preset'"
        in result.stderr
    )


@pytest.fixture
def installed_entry_point(tmp_path):
    """verifyprof's declared sglang.srt.plugins entry point, as pip installs it (a dist-info)."""
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"][
        "sglang.srt.plugins"
    ]
    site = tmp_path / "site"
    info = site / "verifyprof-0.0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: verifyprof\nVersion: 0.0.0\n")
    lines = ["[sglang.srt.plugins]"] + [f"{name} = {value}" for name, value in declared.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return site


LOAD_PLUGINS = """
    # What sglang.srt.plugins.load_plugins() does with the general plugin group.
    import json, sys
    from importlib.metadata import entry_points
    names = []
    for ep in entry_points(group="sglang.srt.plugins"):
        names.append(ep.name)
        ep.load()()
    hooks = sys.modules.get("verifyprof.capture.hooks.api")
    print(json.dumps({"plugins": names, "hooks_imported": hooks is not None,
                      "states": {s.target: s.state for s in hooks.status()} if hooks else {}}))
"""


def test_sglang_plugin_entry_point_installs_the_hooks_when_the_variable_is_set(
    tmp_path, installed_entry_point
):
    env = {
        "PYTHONPATH": os.pathsep.join([str(installed_entry_point), str(REPO)]),
        "VERIFYPROF_HOOKS": "sglang,json:dumps=accept",
    }
    result = _python(LOAD_PLUGINS, env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["plugins"] == ["verifyprof"]
    assert out["states"]["json:dumps"] == "patched"
    assert out["states"]["sglang.srt.speculative.eagle_worker_v2:EAGLEWorkerV2.verify"] == "pending"


def test_sglang_plugin_entry_point_does_nothing_without_the_variable(
    tmp_path, installed_entry_point
):
    env = {"PYTHONPATH": os.pathsep.join([str(installed_entry_point), str(REPO)])}
    result = _python(LOAD_PLUGINS, env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "plugins": ["verifyprof"],
        "hooks_imported": False,
        "states": {},
    }
