"""Context rules of the taxonomy: a generic kernel's phase decided by the GPU ops beside it. The
built-in one books torch-native MoE routing (the router's top-k, sorts and the per-expert token
scan, all generic torch kernels) to moe_aux when it runs between a router GEMM and an expert GEMM,
and leaves the same kernels elementwise anywhere else; on real traces."""

from __future__ import annotations

import re

import pytest
from cli_helpers import verifyprof
from conftest import OWN_TRACES, REPO

from verifyprof.attribution.breakdown import breakdown
from verifyprof.attribution.kernels import kernel_table
from verifyprof.attribution.taxonomy import load_taxonomy
from verifyprof.contracts import phases
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.trace import load_trace

ROUTING = re.compile(r"gatherTopK|radixSortKVInPlace|bitonicSortKVInPlace|DeviceScan")
MOE = OWN_TRACES / "workload-moe-eager" / "trace.sqlite.gz"
DENSE_WITH_SCANS = (
    OWN_TRACES / "capture-hf-assisted"
)  # transformers' assisted generation: cumsum scans, no MoE


def routing_rows(path, taxonomy=None):
    table = kernel_table(load_trace(path), taxonomy or load_taxonomy()).table
    return table[table["name"].str.contains(ROUTING)]


def test_torch_moe_routing_kernels_between_router_and_expert_gemm_are_moe_aux():
    rows = routing_rows(MOE)
    assert {"gatherTopK", "radixSortKVInPlace", "bitonicSortKVInPlace", "DeviceScan"} <= {
        n for name in rows["name"] for n in ROUTING.findall(name)
    }
    assert set(rows["phase"]) == {"moe_aux"}
    assert (
        rows["total_ns"].sum() > 0.05 * kernel_table(load_trace(MOE), load_taxonomy()).total_ns
    )  # ~9% of kernel time


def test_the_same_generic_kernels_outside_a_moe_layer_stay_elementwise():
    rows = routing_rows(DENSE_WITH_SCANS)
    assert len(rows) > 0 and set(rows["phase"]) == {"elementwise"}


def test_the_moe_steps_book_routing_time_to_moe_aux_and_still_sum_to_wall():
    steps = breakdown(load_trace(MOE)).steps
    verify = steps[steps["name"] == "verifyprof.verify"]
    assert len(verify) > 0 and (verify["moe_aux"] > 0).all()
    assert (steps[list(phases.ALL)].sum(axis=1) == steps["wall_ns"]).all()


def test_a_user_context_rule_can_split_one_kernel_name_over_two_phases(tmp_path):
    text = (REPO / "verifyprof" / "data" / "taxonomy.toml").read_text()
    custom = (
        tmp_path / "taxonomy.toml"
    )  # also: elementwise_kernel right before an expert GEMM is MoE prep
    custom.write_text(
        text + '\n[[context]]\nphase = "moe_aux"\nfrom = "elementwise"\npatterns = ["^void'
        ' at::native::elementwise_kernel"]\nbefore = "gemm_moe"\nuntil = ["gemm_dense",'
        ' "attention", "norm"]\n'
    )
    table = kernel_table(load_trace(MOE), load_taxonomy(custom)).table
    split = table[table["name"].duplicated(keep=False)]
    assert set(split["phase"]) == {"elementwise", "moe_aux"}


@pytest.mark.parametrize(
    "field, value",
    [("phase", "memcpy"), ("from", "nonsense"), ("before", "gemm"), ("until", "graph_gap")],
)
def test_a_context_rule_naming_no_booked_phase_is_one_error_naming_the_rule(tmp_path, field, value):
    entry = {
        "phase": "moe_aux",
        "from": "elementwise",
        "before": "gemm_moe",
        "until": "gemm_dense",
    } | {field: value}
    rule = "".join(f'{k} = "{v}"\n' for k, v in entry.items())
    path = tmp_path / "taxonomy.toml"
    path.write_text(
        f'[[rule]]\nphase = "elementwise"\npatterns = ["x"]\n\n[[context]]\n{rule}patterns ='
        ' ["topk"]\n'
    )
    with pytest.raises(VerifyprofError, match=f"context rule 1: {field} '{value}' is not one of"):
        load_taxonomy(path)


RULE = '[[rule]]\nphase = "elementwise"\npatterns = ["x"]\n\n'


@pytest.mark.parametrize(
    "text, problem",
    [
        (
            '[context]\nphase = "moe_aux"\n',
            "'context' must be an array of tables, written [[context]]",
        ),
        ("context = 3\n", "'context' must be an array of tables"),
        (
            '[[context]]\nphase = "moe_aux"\nbefore = "gemm_moe"\npatterns = ["topk"]\n',
            "context rule 1: missing 'from'",
        ),
        (
            (
                '[[context]]\nphase = "moe_aux"\nfrom = "elementwise"\nbefore = "gemm_moe"\nuntil ='
                ' 5\npatterns = ["t"]\n'
            ),
            "until must be a phase or a list",
        ),
        (
            (
                '[[context]]\nphase = "moe_aux"\nfrom = "elementwise"\nbefore ='
                ' "gemm_moe"\npatterns = [1]\n'
            ),
            "patterns must be a list of regular expressions",
        ),
        (
            (
                '[[context]]\nphase = "moe_aux"\nfrom = "gemm_moe"\nbefore = "gemm_moe"\npatterns ='
                ' ["t"]\n'
            ),
            "it could never change anything",
        ),
        (
            (
                '[[context]]\nphase = "moe_aux"\nfrom = "elementwise"\nbefore = "gemm_moe"\nuntill'
                ' = ["attention"]\npatterns = ["t"]\n'
            ),
            "context rule 1: unknown key 'untill'",
        ),
        ('[[rules]]\nphase = "norm"\npatterns = ["x"]\n', "taxonomy: unknown key 'rules'"),
        ("version = 2\n", "taxonomy version 2 is not one this verifyprof reads"),
        (
            (
                '[[context]]\nphase = "moe_aux"\nfrom = "elementwise"\nbefore ='
                ' "gemm_moe"\npatterns = ["ok", "(unclosed"]\n'
            ),
            "bad regex '(unclosed'",
        ),
    ],
    ids=[
        "table",
        "number",
        "no-from",
        "until-number",
        "pattern-number",
        "from-is-before",
        "typo-key",
        "typo-table",
        "version",
        "bad-regex",
    ],
)
def test_a_malformed_context_rule_is_one_line_and_exit_2_through_the_cli(tmp_path, text, problem):
    path = tmp_path / "taxonomy.toml"
    path.write_text(
        RULE + text if text.startswith("[") else text + RULE
    )  # a bare key: before any table
    done = verifyprof("kernels", str(MOE), "--taxonomy", str(path))
    assert done.returncode == 2 and problem in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_patterns_given_as_one_string_are_one_regex_not_its_characters(tmp_path):
    text = (
        (REPO / "verifyprof" / "data" / "taxonomy.toml")
        .read_text()
        .replace("patterns = ['gatherTopK|radixSort", "patterns = 'gatherTopK|radixSort")
        .replace("|bincount|histogram']", "|bincount|histogram'")
    )
    path = tmp_path / "taxonomy.toml"
    path.write_text(text)
    one_string = kernel_table(load_trace(MOE), load_taxonomy(path))
    as_list = kernel_table(load_trace(MOE), load_taxonomy())
    assert one_string.table.equals(as_list.table)
    assert one_string.to_json()["distinct_kernels"] == as_list.table["name"].nunique()
