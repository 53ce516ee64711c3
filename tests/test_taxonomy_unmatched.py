"""A user's taxonomy rule that matches no kernel says so (issue 44): ``kernels`` shows ``saxpy``,
but rules are searched in the full name ``saxpy(double *, ...)``, so a rule ``'^saxpy$'`` books
nothing; the warning names the rule, its phase and its pattern, and the full name it missed."""

from __future__ import annotations

import json

from cli_helpers import REPO, verifyprof

SAXPY = str(REPO / "tests/data/public/nsys/pipit_saxpy_mpi_a100_nsys2022.2.sqlite.gz")
RULES = """
[[rule]]
phase = "gemm_dense"
patterns = ["^saxpy$", "no_kernel_is_named_so"]

[[rule]]
phase = "elementwise"
pattern = '^saxpy\\('
"""


def rules_file(tmp_path):
    path = tmp_path / "rules.toml"
    path.write_text(RULES)
    return str(path)


def test_a_rule_matching_no_kernel_is_named_in_a_warning(tmp_path):
    shown = verifyprof("kernels", SAXPY, "--taxonomy", rules_file(tmp_path))
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert (
        "warning: taxonomy rule 1 (gemm_dense) '^saxpy$' matches no kernel of the trace: it"
        " matches the short name of 'saxpy(double *, double *, double *, double, int)'; rules"
        " match the full name" in text
    )
    assert "taxonomy rule 1 (gemm_dense) 'no_kernel_is_named_so' matches no kernel" in text
    assert "taxonomy rule 2" not in text  # the rule that matched says nothing
    built_in = verifyprof("kernels", SAXPY)  # its rules for kernels this trace lacks: silent
    assert built_in.returncode == 0 and "matches no kernel" not in built_in.stdout


def test_breakdown_json_lists_the_warning_with_the_traces_others(tmp_path):
    shown = verifyprof("breakdown", SAXPY, "--taxonomy", rules_file(tmp_path), "--json")
    assert shown.returncode == 0, shown.stderr
    warnings = json.loads(shown.stdout)["trace"]["warnings"]
    assert sum("matches no kernel of the trace" in w for w in warnings) == 2
