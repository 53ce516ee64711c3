"""The folder Python puts first on sys.path for a command line, as the interpreter decides it."""

from __future__ import annotations

from verifyprof.capture.hooks.search_path import is_main_module, program_folder


def test_a_script_run_by_python_starts_with_the_scripts_folder(tmp_path):
    assert (
        program_folder(["python", "-u", "sub/run.py", "--flag"], cwd=tmp_path, environ={})
        == tmp_path / "sub"
    )


def test_a_module_or_code_run_by_python_starts_with_the_current_folder(tmp_path):
    for argv in (
        ["python3", "-m", "pkg.main"],
        ["python3.11", "-X", "dev", "-mpkg"],
        ["python", "-c", "pass"],
    ):
        assert program_folder(argv, cwd=tmp_path, environ={}) == tmp_path, argv


def test_isolated_and_safe_path_interpreters_add_no_folder(tmp_path):
    assert program_folder(["python", "-I", "run.py"], cwd=tmp_path, environ={}) is None
    assert program_folder(["python", "-P", "-m", "pkg"], cwd=tmp_path, environ={}) is None
    assert (
        program_folder(["python", "run.py"], cwd=tmp_path, environ={"PYTHONSAFEPATH": "1"}) is None
    )


def test_an_executable_py_script_starts_with_its_folder_and_other_programs_are_unknown(tmp_path):
    assert program_folder(["./tools/run.py"], cwd=tmp_path, environ={}) == tmp_path / "tools"
    assert (
        program_folder(["torchrun", "--nproc-per-node", "2", "run.py"], cwd=tmp_path, environ={})
        is None
    )


def test_the_main_module_is_the_script_by_name_or_by_file(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "script.py").write_text("")
    for argv in (
        ["python", "-u", "pkg/script.py", "--flag"],
        ["./pkg/script.py"],
        ["python", "-Wignore", "pkg/script.py"],
    ):
        assert is_main_module("script", argv, cwd=tmp_path, environ={}), argv
        assert is_main_module("pkg.script", argv, cwd=tmp_path, environ={}), (
            argv
        )  # the same file by another name
        assert not is_main_module("pkg", argv, cwd=tmp_path, environ={}), argv


def test_dash_m_runs_a_module_or_a_packages_main_as_main(tmp_path):
    (tmp_path / "tool.py").write_text("")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "__main__.py").write_text("")
    for argv in (
        ["python", "-m", "tool"],
        ["python3", "-X", "dev", "-um", "tool"],
        ["python", "-mtool"],
    ):
        assert is_main_module("tool", argv, cwd=tmp_path, environ={}), argv
    app = ["python", "-m", "app"]
    assert is_main_module("app.__main__", app, cwd=tmp_path, environ={})
    assert not is_main_module(
        "app", app, cwd=tmp_path, environ={}
    )  # the package itself is imported as usual


def test_a_launcher_runs_its_script_as_main_in_every_worker(tmp_path):
    for argv in (
        ["torchrun", "--nproc-per-node", "2", "train.py", "--x"],
        ["accelerate", "launch", "train.py"],
        ["python", "-m", "torch.distributed.run", "--nproc-per-node=8", "train.py"],
    ):
        assert is_main_module("train", argv, cwd=tmp_path, environ={}), argv


def test_code_the_interactive_interpreter_and_other_programs_run_no_module_as_main(tmp_path):
    for argv in (
        ["python", "-c", "import x"],
        ["python"],
        ["bash", "run.sh"],
        ["python", "my-tool.py"],
    ):
        assert not is_main_module("x", argv, cwd=tmp_path, environ={}), argv


def test_a_warning_filter_naming_a_warning_class_is_not_the_isolated_flag(tmp_path):
    assert (
        program_folder(["python", "-Wignore::ImportWarning", "run.py"], cwd=tmp_path, environ={})
        == tmp_path
    )
