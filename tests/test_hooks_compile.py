"""Hooks and torch.compile (torch's CPU build, Dynamo for real): a hooked function handed to
torch.compile, directly or by rebinding a module global to its compiled self, is compiled with the
range around it on the host; hooked code that Dynamo traces emits nothing and never breaks it."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest
import torch
from hooks_helpers import demo_module, profiled

from verifyprof.capture.hooks import api as hooks
from verifyprof.capture.hooks import wrappers

MODEL = '''
import torch

def model_forward(input_ids):
    return torch.sin(input_ids) * 2

def compile_it(**options):
    """What a third-party script does after import: rebind the global to its compiled self."""
    global model_forward
    model_forward = torch.compile(model_forward, **options)

def generate(input_ids):
    return model_forward(input_ids)


class State:
    """What the project's workload does: torch.compile(self.state.verify), a bound method."""

    def __init__(self, scale):
        self.scale = scale

    def verify(self, input_ids):
        return torch.cos(input_ids) * self.scale
'''


@pytest.fixture
def model(tmp_path, monkeypatch):
    yield from demo_module(tmp_path, monkeypatch, "compdemo", MODEL)


class CountingBackend:
    """A torch.compile backend that runs the FX graph as is and counts the graphs it was given."""

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, graph_module, example_inputs):
        self.graphs += 1
        return graph_module.forward


def test_compiling_a_hooked_function_with_fullgraph_runs_and_keeps_the_range_on_the_host(model):
    hooks.patch(f"{model}:model_forward", "verify")
    module = importlib.import_module(model)
    compiled = torch.compile(module.model_forward, backend="eager", fullgraph=True)
    x = torch.ones(3)
    result, recorded = profiled(compiled, x)
    assert torch.equal(result, torch.sin(x) * 2)
    assert [r.text for r in recorded] == ["verifyprof.verify"]


def test_a_module_global_rebound_to_its_compiled_self_is_compiled_and_ranged(model):
    hooks.patch(f"{model}:model_forward", "verify")
    module = importlib.import_module(model)
    backend = CountingBackend()
    module.compile_it(backend=backend, fullgraph=True)
    x = torch.ones(2, 4)
    first, recorded = profiled(module.generate, x)
    second, again = profiled(module.generate, x)
    assert torch.equal(first, torch.sin(x) * 2) and torch.equal(second, first)
    assert backend.graphs == 1  # compiled once, the second call replays it
    assert [r.text for r in recorded + again] == ["verifyprof.verify", "verifyprof.verify"]
    assert {s.target: dict(s.calls) for s in hooks.status()}[f"{model}:model_forward"] == {
        f"{model}:model_forward": 2
    }


def test_torch_compile_as_a_decorator_factory_keeps_the_range(model):
    wrapped = hooks.wrap(lambda x: x + 1, "draft")
    compiled = torch.compile(backend="eager", fullgraph=True)(wrapped)
    result, recorded = profiled(compiled, torch.zeros(2))
    assert torch.equal(result, torch.ones(2)) and [r.text for r in recorded] == ["verifyprof.draft"]


def test_a_hooked_function_traced_inside_a_compiled_caller_emits_nothing_and_does_not_break_it(
    model,
):
    hooks.patch(f"{model}:model_forward", "verify")
    module = importlib.import_module(model)

    def outer(x):
        return module.model_forward(x) + 1

    compiled = torch.compile(outer, backend="eager", fullgraph=True)
    x = torch.ones(3)
    result, recorded = profiled(compiled, x)
    assert torch.equal(result, torch.sin(x) * 2 + 1)
    assert recorded == []  # traced into the graph: no host call left to bracket


def test_the_compiling_guard_never_imports_torch():
    code = (
        "import sys; from verifyprof.capture.hooks import wrappers; print(wrappers.compiling(),"
        " 'torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "False"], done.stderr
    assert wrappers.compiling() is False  # torch loaded here, nothing compiling


def test_a_hooked_method_compiled_through_its_bound_instance_keeps_self_and_the_range(model):
    hooks.install(f"{model}:State.verify=verify;tokens=arg0.shape[-1]")  # as --hook gives it
    module = importlib.import_module(model)
    state = module.State(3.0)
    compiled = torch.compile(state.verify, backend="eager", fullgraph=True)
    x = torch.ones(2, 5)
    result, recorded = profiled(compiled, x)
    assert torch.equal(result, torch.cos(x) * 3.0)
    assert [r.text for r in recorded] == [
        "verifyprof.verify tokens=5"
    ]  # arg0 is the first argument after self
