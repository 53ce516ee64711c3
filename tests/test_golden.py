"""Every bundled and representative public trace gives exactly its committed golden output.

A failure lists the fields that changed. If the change is deliberate, regenerate with
``python tests/golden_cases.py --regenerate`` and say why in the commit.
"""

from __future__ import annotations

import json

import pytest
from golden_cases import CASES, GOLDEN, differences, run_case


@pytest.mark.parametrize("name", sorted(CASES))
def test_output_equals_the_golden_file(name):
    path = GOLDEN / f"{name}.json"
    assert path.is_file(), (
        f"no golden file for {name}: python tests/golden_cases.py --regenerate {name}"
    )
    expected = json.loads(path.read_text())
    diffs = differences(expected, run_case(CASES[name]))
    assert not diffs, f"{len(diffs)} fields changed, first ones:\n" + "\n".join(diffs[:25])


def test_differences_reports_a_changed_number_and_a_missing_field():
    assert differences({"a": 1, "b": [1.0, 2]}, {"a": 2, "b": [1.0, 2]}) == ["$.a: 1 -> 2"]
    assert differences({"a": 1}, {}) == ["$.a: missing"]
    assert differences({"x": 1.0}, {"x": 1.0 + 1e-12}) == []
    assert differences({"x": 1}, {"x": 1.0}) != []
