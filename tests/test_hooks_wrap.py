"""wrap()/@hook: a callable inside a verifyprof range, host behaviour untouched."""

from __future__ import annotations

import inspect

import pytest
import torch  # noqa: F401  (the test command installs it)
from hooks_helpers import Recorded, profiled

from verifyprof.capture.hooks import api as hooks
from verifyprof.contracts.errors import VerifyprofError


def scale(x: int, factor: int = 2, *, offset: int = 0) -> int:
    """Multiply and shift."""
    return x * factor + offset


def test_wrapped_function_returns_what_the_original_returns():
    wrapped = hooks.wrap(scale, "verify")
    assert wrapped(3) == 6
    assert wrapped(3, 5, offset=1) == 16
    assert wrapped(x=2, factor=4) == 8


def test_wrapper_keeps_name_docstring_and_signature():
    wrapped = hooks.wrap(scale, "verify")
    assert wrapped.__name__ == "scale"
    assert wrapped.__doc__ == "Multiply and shift."
    assert inspect.signature(wrapped) == inspect.signature(scale)
    assert wrapped.__wrapped__ is scale


def test_exception_of_the_wrapped_function_propagates_and_closes_the_range():
    def boom() -> None:
        raise KeyError("host error")

    wrapped = hooks.wrap(boom, "verify")
    with pytest.raises(KeyError, match="host error"):
        wrapped()
    assert hooks.active_ranges() == ()
    assert hooks.wrap(scale, "accept")(1) == 2  # later ranges still open and close


def test_range_appears_in_torch_profiler_with_attributes():
    wrapped = hooks.wrap(scale, "verify", attrs=lambda call: {"bs": call.arg("x"), "graph": True})
    result, ranges = profiled(wrapped, 4)
    assert result == 8
    assert ranges == [Recorded("verifyprof.verify bs=4 graph=1", None)]


def test_decorator_form_opens_a_range_per_call():
    @hooks.hook("draft", attrs={"tokens": 3})
    def propose() -> str:
        return "drafts"

    result, ranges = profiled(lambda: [propose(), propose()])
    assert result == ["drafts", "drafts"]
    assert [r.text for r in ranges] == ["verifyprof.draft tokens=3"] * 2


def test_wrapping_a_wrapper_does_not_nest():
    once = hooks.wrap(scale, "verify")
    assert hooks.wrap(once, "verify") is once
    _, ranges = profiled(once, 1)
    assert len(ranges) == 1


def test_same_phase_nested_call_gives_only_the_outer_range():
    inner = hooks.wrap(lambda: scale(1), "verify", attrs={"level": "inner"})
    outer = hooks.wrap(lambda: inner() + 1, "verify", attrs={"level": "outer"})
    _, ranges = profiled(outer)
    assert ranges == [Recorded("verifyprof.verify level=outer", None)]


def test_other_phases_nest_inside_each_other():
    accept = hooks.wrap(lambda: 1, "accept")
    verify = hooks.wrap(lambda: accept() + 1, "verify")
    step = hooks.wrap(lambda: verify() + 1, "spec_step")
    result, ranges = profiled(step)
    assert result == 3
    assert ranges == [
        Recorded("verifyprof.spec_step", None),
        Recorded("verifyprof.verify", "verifyprof.spec_step"),
        Recorded("verifyprof.accept", "verifyprof.verify"),
    ]


def test_predicate_selects_which_calls_get_a_range():
    wrapped = hooks.wrap(scale, "verify", when=lambda call: call.arg("x") > 10)
    result, ranges = profiled(lambda: [wrapped(1), wrapped(11), wrapped(x=12)])
    assert result == [2, 22, 24]
    assert len(ranges) == 2


def test_failing_predicate_means_no_range_but_the_call_still_runs():
    wrapped = hooks.wrap(scale, "verify", when=lambda call: 1 / 0)
    result, ranges = profiled(wrapped, 5)
    assert result == 10
    assert ranges == []


def test_failing_extractor_is_swallowed_and_the_range_has_no_attributes():
    wrapped = hooks.wrap(scale, "verify", attrs=lambda call: {"bs": call.arg("missing").shape[0]})
    result, ranges = profiled(wrapped, 5)
    assert result == 10
    assert ranges == [Recorded("verifyprof.verify", None)]


def test_rules_of_one_function_are_tried_in_order():
    wrapped = hooks.wrap(scale, "verify", when=lambda call: call.arg("x") == 1)
    wrapped = hooks.wrap(wrapped, "decode", when=lambda call: call.arg("x") == 2)
    _, ranges = profiled(lambda: [wrapped(1), wrapped(2), wrapped(3)])
    assert [r.text for r in ranges] == ["verifyprof.verify", "verifyprof.decode"]


def test_full_range_names_are_accepted_as_phases():
    _, ranges = profiled(hooks.wrap(scale, "verifyprof.accept"), 1)
    assert [r.text for r in ranges] == ["verifyprof.accept"]


def test_unknown_phase_is_one_clear_error_line():
    with pytest.raises(VerifyprofError) as err:
        hooks.wrap(scale, "verfy")
    message = str(err.value)
    assert "unknown phase 'verfy'" in message and "verify" in message
    assert "\n" not in message


def test_wrapped_method_binds_self():
    class Worker:
        def __init__(self) -> None:
            self.calls = 0

        def verify(self, tokens: int) -> int:
            self.calls += 1
            return tokens + 1

    Worker.verify = hooks.wrap(
        Worker.verify, "verify", attrs=lambda call: {"tokens": call.arg("tokens")}
    )
    worker = Worker()
    result, ranges = profiled(worker.verify, 3)
    assert (result, worker.calls) == (4, 1)
    assert [r.text for r in ranges] == ["verifyprof.verify tokens=3"]
