"""Tagged hooks: range attributes and a condition taken from the call's arguments (by position or
name, also through a torch.compile result), from the --hook spec and from preset TOML."""

from __future__ import annotations

import importlib
import textwrap

import pytest
import torch
from hooks_helpers import demo_module, profiled

from verifyprof.capture.hooks import api as hooks
from verifyprof.capture.hooks.presets import load_preset, parse_user_hook, split_spec
from verifyprof.contracts.errors import VerifyprofError

MODEL = '''
import torch

def model_forward(input_ids, cache=None):
    """Both jobs of a third-party script: the target's k+1-token verify, the draft's 1-token
    catch-up."""
    return input_ids.sum()

class Model:
    def forward(self, input_ids):
        return input_ids.sum()

def run(widths):
    for width in widths:
        model_forward(torch.ones(2, width))
'''
VERIFY = (
    "tagdemo:model_forward=verify;tokens=arg0.shape[-1];bs=input_ids.shape[0];"
    "when=arg0.shape[-1] > 1"
)
CATCH_UP = "tagdemo:model_forward=draft_extend;tokens=arg0.shape[-1]"


@pytest.fixture
def model(tmp_path, monkeypatch):
    yield from demo_module(tmp_path, monkeypatch, "tagdemo", MODEL)


def texts(fn, *args) -> list[str]:
    return [r.text for r in profiled(fn, *args)[1]]


def test_a_condition_on_the_width_splits_one_function_into_verify_and_draft_extend(model):
    hooks.install([VERIFY, CATCH_UP])
    module = importlib.import_module(model)
    assert texts(module.run, [5, 1, 5]) == [
        "verifyprof.verify tokens=5 bs=2",
        "verifyprof.draft_extend tokens=1",
        "verifyprof.verify tokens=5 bs=2",
    ]


def test_positional_and_named_lookups_work_on_a_compiled_callable(model):
    hooks.install([VERIFY, CATCH_UP])
    module = importlib.import_module(model)
    compiled = torch.compile(module.model_forward, backend="eager", fullgraph=True)
    assert texts(compiled, torch.ones(2, 4)) == ["verifyprof.verify tokens=4 bs=2"]
    assert texts(lambda: compiled(input_ids=torch.ones(3, 1))) == [
        "verifyprof.draft_extend tokens=1"
    ]


def test_a_function_compiled_before_it_was_hooked_still_finds_arguments_by_name(model):
    module = importlib.import_module(model)
    module.model_forward = torch.compile(module.model_forward, backend="eager")  # *args, **kwargs
    hooks.install(["tagdemo:model_forward=verify;bs=input_ids.shape[0];tokens=arg0.shape[1]"])
    assert texts(module.model_forward, torch.ones(3, 2)) == ["verifyprof.verify bs=3 tokens=2"]


def test_arg0_of_a_method_is_the_first_argument_after_self(model):
    hooks.install(["tagdemo:Model.forward=verify;tokens=arg0.shape[-1]"])
    module = importlib.import_module(model)
    assert texts(module.Model().forward, torch.ones(1, 7)) == ["verifyprof.verify tokens=7"]


def test_an_attribute_that_fails_or_is_a_tensor_is_left_out_and_the_call_still_runs(model):
    hooks.install(
        ["tagdemo:model_forward=verify;tokens=arg0.shape[-1];bad=cache.shape[0];tensor=arg0[0]"]
    )
    module = importlib.import_module(model)
    result, recorded = profiled(module.model_forward, torch.ones(2, 3))
    assert float(result) == 6.0 and [r.text for r in recorded] == ["verifyprof.verify tokens=3"]


def test_a_condition_comparing_a_tensor_does_not_hold_rather_than_synchronise(model):
    hooks.install(["tagdemo:model_forward=verify;when=arg0 > 0"])
    module = importlib.import_module(model)
    assert texts(module.model_forward, torch.ones(2, 3)) == []


def test_commas_and_semicolons_inside_brackets_do_not_split_the_spec():
    spec = "sglang,m:f=verify;tokens=arg0.shape[0:2][-1];when=arg0.shape[-1] in (4, 5),m:g=draft"
    assert split_spec(spec) == [
        "sglang",
        "m:f=verify;tokens=arg0.shape[0:2][-1];when=arg0.shape[-1] in (4, 5)",
        "m:g=draft",
    ]
    entry = parse_user_hook(split_spec(spec)[1])
    assert (
        entry.tags == (("tokens", "arg0.shape[0:2][-1]"),)
        and entry.when == "arg0.shape[-1] in (4, 5)"
    )


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("m:f=verify;tokens=arg0.shape[", "is not an expression"),
        ("m:f=verify;tokens=arg0.item()", "only len, min, max, abs may be called"),
        ("m:f=verify;tokens=arg0.__class__", "names starting with _ are not readable"),
        ("m:f=verify;when=is_verify", "unknown predicate 'is_verify'"),
        ("m:f=verify;tokens", "is not key=expression"),
        ("m:f=verify;2x=arg0", "is not an identifier"),
    ],
)
def test_a_bad_tagged_hook_is_one_clear_error(spec, problem):
    with pytest.raises(VerifyprofError, match="bad hook") as caught:
        parse_user_hook(spec)
    assert problem in str(caught.value) and "\n" not in str(caught.value)


def test_a_preset_toml_takes_a_condition_and_attribute_expressions(tmp_path, model):
    path = tmp_path / "mine.toml"
    path.write_text(
        textwrap.dedent("""
        name = "mine"
        [[hook]]
        phase = "verify"
        when = "arg0.shape[-1] > 1"
        attrs = {tokens = "arg0.shape[-1]", bs = "len(arg0)"}
        targets = ["tagdemo:model_forward"]
        [[hook]]
        phase = "draft_extend"
        attrs = {tokens = "arg0.shape[-1]"}
        targets = ["tagdemo:model_forward"]
    """)
    )
    entry = load_preset(path).entries[0]
    assert entry.when == "arg0.shape[-1] > 1" and dict(entry.tags) == {
        "tokens": "arg0.shape[-1]",
        "bs": "len(arg0)",
    }
    hooks.install(str(path))
    module = importlib.import_module(model)
    assert texts(module.run, [3, 1]) == [
        "verifyprof.verify tokens=3 bs=2",
        "verifyprof.draft_extend tokens=1",
    ]


def test_installing_the_same_tagged_spec_twice_adds_no_rule(model):
    hooks.install([VERIFY])
    hooks.install([VERIFY])
    module = importlib.import_module(model)
    assert texts(module.run, [4]) == ["verifyprof.verify tokens=4 bs=2"]
    assert len(hooks.status()[0].sources) == 1
