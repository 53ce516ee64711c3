"""Hooks specs, presets as data, and the environment a capture hands to the server."""

from __future__ import annotations

import os

import pytest

from verifyprof.capture.hooks import api as hooks
from verifyprof.capture.hooks.extractors import EXTRACTORS, PREDICATES
from verifyprof.capture.hooks.lookup import Target
from verifyprof.capture.hooks.presets import (
    builtin_presets,
    load_preset,
    parse_user_hook,
    resolve_spec,
)
from verifyprof.contracts.errors import VerifyprofError


def test_user_hook_names_a_target_and_a_phase():
    entry = parse_user_hook(" mypkg.model:Model.forward=verify ")
    assert entry.range_name == "verifyprof.verify"
    assert [alt.target for alt in entry.alternatives] == [Target("mypkg.model", "Model.forward")]
    assert entry.user


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("mypkg.model.Model.forward=verify", "no ':' between module and name"),
        ("mypkg.model:Model.forward", "expected module:qualname=phase"),
        ("mypkg.model:Model.forward=verfy", "unknown phase 'verfy'"),
        ("my pkg:f=verify", "is not a dotted module name"),
        ("mypkg:Model..forward=verify", "is not a dotted attribute name"),
        ("=verify", "expected module:qualname=phase"),
    ],
)
def test_bad_user_hook_is_one_clear_error_line(spec, problem):
    with pytest.raises(VerifyprofError) as err:
        resolve_spec(f"sglang,{spec}")
    message = str(err.value)
    assert problem in message
    assert repr(spec) in message
    assert "\n" not in message


def test_spec_mixes_presets_and_user_hooks_in_order():
    entries = resolve_spec("workload, mymod:f=accept")
    assert len(entries) == len(load_preset("workload").entries) + 1
    assert entries[-1].source == "user hook mymod:f=accept"


def test_unknown_preset_lists_the_built_in_ones():
    with pytest.raises(
        VerifyprofError,
        match=r"unknown hook preset 'sglangg' \(known: hf-assisted, sglang, workload;",
    ):
        resolve_spec("sglangg")


def test_built_in_presets_load_with_known_phases_predicates_and_extractors():
    assert builtin_presets() == ["hf-assisted", "sglang", "workload"]
    for name in builtin_presets():
        preset = load_preset(name)
        assert preset.entries
        for entry in preset.entries:
            assert entry.alternatives
            assert entry.when is None or entry.when in PREDICATES
            assert entry.attrs is None or entry.attrs in EXTRACTORS


def test_sglang_preset_covers_every_spec_phase_and_the_version_robust_verify():
    preset = load_preset("sglang")
    phases = {entry.phase for entry in preset.entries}
    assert {"spec_step", "draft", "verify", "accept", "draft_extend", "decode", "prefill"} <= phases
    robust = [e for e in preset.entries if e.when == "sglang_target_verify"]
    assert [str(alt.target) for e in robust for alt in e.alternatives] == [
        "sglang.srt.model_executor.model_runner:ModelRunner.forward"
    ]


def _preset_file(tmp_path, text):
    path = tmp_path / "mine.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[[hook]\n", "not a valid hook preset (TOML)"),
        ("name = 'x'\n", "bad hook preset: no [[hook]] entries"),
        ("[[hook]]\nphase = 'verify'\n", "bad hook preset: mine.toml hook 1: no targets"),
        ("[[hook]]\ntargets = ['m:f']\n", "bad hook preset: mine.toml hook 1: no phase"),
        (
            "[[hook]]\nphase = 'verify'\nwhen = 'nope'\ntargets = ['m:f']\n",
            "unknown predicate 'nope'",
        ),
        (
            "[[hook]]\nphase = 'verify'\nattrs = 'nope'\ntargets = ['m:f']\n",
            "unknown attrs extractor 'nope'",
        ),
        (
            "[[hook]]\nphase = 'verify'\nmode = 'around'\ntargets = ['m:f']\n",
            "mode must be one of call, self_forward",
        ),
        (
            "[[hook]]\nphase = 'verify'\ntargets = ['m.f']\n",
            "mine.toml hook 1: target 'm.f' has no ':'",
        ),
    ],
)
def test_bad_preset_file_is_one_line_naming_the_file(tmp_path, text, problem):
    path = _preset_file(tmp_path, text)
    with pytest.raises(VerifyprofError) as err:
        load_preset(path)
    message = str(err.value)
    assert message.startswith(f"{path}: ")
    assert problem in message
    assert "\n" not in message
    assert path.read_text() == text  # nothing the user gave is modified


def test_missing_preset_file_is_named(tmp_path):
    with pytest.raises(VerifyprofError, match="hook preset file not found"):
        load_preset(tmp_path / "absent.toml")


def test_injection_env_puts_the_sitecustomize_first_and_keeps_the_servers_path():
    env = hooks.injection_env(
        ["sglang"], ["mymod:f=verify"], environ={"PYTHONPATH": f"/a{os.pathsep}/b"}
    )
    assert env["VERIFYPROF_HOOKS"] == "sglang,mymod:f=verify"
    assert env["PYTHONPATH"].split(os.pathsep) == [str(hooks.INJECT_DIR), "/a", "/b"]
    assert (hooks.INJECT_DIR / "sitecustomize.py").is_file()
    assert "SGLANG_PLUGINS" not in env


def test_injection_env_adds_verifyprof_to_an_sglang_plugin_allow_list():
    env = hooks.injection_env(["sglang"], environ={"SGLANG_PLUGINS": "other"})
    assert env["SGLANG_PLUGINS"] == "other,verifyprof"
    assert "SGLANG_PLUGINS" not in hooks.injection_env(
        ["sglang"], environ={"SGLANG_PLUGINS": "verifyprof"}
    )


def test_injection_env_names_the_report_directory(tmp_path):
    env = hooks.injection_env(["sglang"], report_dir=tmp_path, environ={})
    assert env["VERIFYPROF_HOOKS_REPORT"] == str(tmp_path)


def test_injection_env_rejects_bad_hooks_before_the_server_starts():
    with pytest.raises(VerifyprofError, match="unknown hook preset 'nope'"):
        hooks.injection_env(["nope"])
    with pytest.raises(VerifyprofError, match="bad hook 'x=verify'"):
        hooks.injection_env(["sglang"], ["x=verify"])
