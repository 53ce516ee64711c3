"""The folder Python puts first on sys.path for a command line, as the interpreter decides it."""

from __future__ import annotations

from verifyprof.capture.hooks.search_path import main_module, program_folder


def test_a_script_run_by_python_starts_with_the_scripts_folder(tmp_path):
    assert program_folder(["python", "-u", "sub/run.py", "--flag"], cwd=tmp_path, environ={}) == tmp_path / "sub"

def test_a_module_or_code_run_by_python_starts_with_the_current_folder(tmp_path):
    for argv in (["python3", "-m", "pkg.main"], ["python3.11", "-X", "dev", "-mpkg"], ["python", "-c", "pass"]):
        assert program_folder(argv, cwd=tmp_path, environ={}) == tmp_path, argv

def test_isolated_and_safe_path_interpreters_add_no_folder(tmp_path):
    assert program_folder(["python", "-I", "run.py"], cwd=tmp_path, environ={}) is None
    assert program_folder(["python", "-P", "-m", "pkg"], cwd=tmp_path, environ={}) is None
    assert program_folder(["python", "run.py"], cwd=tmp_path, environ={"PYTHONSAFEPATH": "1"}) is None

def test_an_executable_py_script_starts_with_its_folder_and_other_programs_are_unknown(tmp_path):
    assert program_folder(["./tools/run.py"], cwd=tmp_path, environ={}) == tmp_path / "tools"
    assert program_folder(["torchrun", "--nproc-per-node", "2", "run.py"], cwd=tmp_path, environ={}) is None

def test_the_main_module_is_the_scripts_stem_or_the_dash_m_module(tmp_path):
    assert main_module(["python", "-u", "sub/run.py", "--flag"], environ={}) == "run"
    assert main_module(["./tools/serve.py"], environ={}) == "serve"
    assert main_module(["python3", "-X", "dev", "-m", "pkg.main", "x"], environ={}) == "pkg.main"
    assert main_module(["python", "-mpkg"], environ={}) == "pkg"
    for argv in (["python", "-c", "pass"], ["python"], ["torchrun", "run.py"], ["python", "my-tool.py"]):
        assert main_module(argv, environ={}) is None, argv
