"""Context rules of the taxonomy: a generic kernel's phase decided by the GPU ops beside it. The
built-in one books torch-native MoE routing (the router's top-k, sorts and the per-expert token
scan, all generic torch kernels) to moe_aux when it runs between a router GEMM and an expert GEMM,
and leaves the same kernels elementwise anywhere else; on real traces."""

from __future__ import annotations

import re

import pytest
from conftest import OWN_TRACES, REPO

from verifyprof.attribution.breakdown import breakdown
from verifyprof.attribution.kernels import kernel_table
from verifyprof.attribution.taxonomy import load_taxonomy
from verifyprof.contracts import phases
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.trace import load_trace

ROUTING = re.compile(r"gatherTopK|radixSortKVInPlace|bitonicSortKVInPlace|DeviceScan")
MOE = OWN_TRACES / "workload-moe-eager" / "trace.sqlite.gz"
DENSE_WITH_SCANS = OWN_TRACES / "capture-hf-assisted"  # transformers' assisted generation: cumsum scans, no MoE


def routing_rows(path, taxonomy=None):
    table = kernel_table(load_trace(path), taxonomy or load_taxonomy()).table
    return table[table["name"].str.contains(ROUTING)]


def test_torch_moe_routing_kernels_between_router_and_expert_gemm_are_moe_aux():
    rows = routing_rows(MOE)
    assert {"gatherTopK", "radixSortKVInPlace", "bitonicSortKVInPlace", "DeviceScan"} <= {n for name in rows["name"] for n in ROUTING.findall(name)}
    assert set(rows["phase"]) == {"moe_aux"}
    assert rows["total_ns"].sum() > 0.05 * kernel_table(load_trace(MOE), load_taxonomy()).total_ns  # ~9% of kernel time


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
    custom = tmp_path / "taxonomy.toml"  # also: elementwise_kernel right before an expert GEMM is MoE prep
    custom.write_text(text + '\n[[context]]\nphase = "moe_aux"\nfrom = "elementwise"\npatterns = ["^void at::native::elementwise_kernel"]\n'
                      'before = "gemm_moe"\nuntil = ["gemm_dense", "attention", "norm"]\n')
    table = kernel_table(load_trace(MOE), load_taxonomy(custom)).table
    split = table[table["name"].duplicated(keep=False)]
    assert set(split["phase"]) == {"elementwise", "moe_aux"}


@pytest.mark.parametrize("field, value", [("phase", "memcpy"), ("from", "nonsense"), ("before", "gemm"), ("until", "graph_gap")])
def test_a_context_rule_naming_no_booked_phase_is_one_error_naming_the_rule(tmp_path, field, value):
    entry = {"phase": "moe_aux", "from": "elementwise", "before": "gemm_moe", "until": "gemm_dense"} | {field: value}
    rule = "".join(f'{k} = "{v}"\n' for k, v in entry.items())
    path = tmp_path / "taxonomy.toml"
    path.write_text(f'[[rule]]\nphase = "elementwise"\npatterns = ["x"]\n\n[[context]]\n{rule}patterns = ["topk"]\n')
    with pytest.raises(VerifyprofError, match=f"context rule 1: {field} '{value}' is not one of"):
        load_taxonomy(path)
