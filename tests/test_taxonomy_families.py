"""The built-in kernel taxonomy on real inference kernels: one test per kernel family the
rules must place, and `other` under 1% of kernel time on every shipped inference trace.

Families that occur in a shipped trace are tested on that trace's kernel table. Families that
occur in none are tested on kernel names as they are spelled in the public source that defines
them (repository and path beside each name), so a rule that stops matching the real spelling fails.
"""

from __future__ import annotations

import re

import pytest
from conftest import OWN_TRACES, PUBLIC, public_traces

from verifyprof.attribution.kernels import kernel_table
from verifyprof.attribution.taxonomy import load_taxonomy
from verifyprof.trace import load_trace

TAXONOMY = load_taxonomy()
B200 = PUBLIC / "kineto" / "tracelens_b200_vllm_moe_eager_trace.json.gz"
MI300X = PUBLIC / "kineto" / "tracelens_mi300x_sglang_qwen3-8b_decode.json.gz"

# Shipped traces that are not LLM inference, so the inference taxonomy is not expected to cover
# them.
NOT_INFERENCE = {
    "hta_nccl_data_a100_rank0of2.json.gz": (
        "ResNet-style training step: cuDNN convolutions, batch norm, max-pool backward"
    ),
    "pipit_saxpy_mpi_a100_nsys2022.2.sqlite.gz": "MPI saxpy demo: one user kernel `saxpy`",
    "flameox_cudagraph_rtx3060_nsys2025.5.sqlite": (
        "toy `add_one` kernels; graphs traced whole, so no graph kernels are recorded"
    ),
}
SHIPPED = public_traces("nsys") + public_traces("kineto") + sorted(OWN_TRACES.glob("*/*.sqlite.gz"))
INFERENCE = [p for p in SHIPPED if p.name not in NOT_INFERENCE]


@pytest.fixture(scope="module")
def tables():
    cache = {}

    def table(path):
        if path not in cache:
            cache[path] = kernel_table(load_trace(path), TAXONOMY).table
        return cache[path]

    return table


def phases_of(table, pattern: str) -> dict[str, str]:
    """Phase of every kernel in the table whose name matches ``pattern``; fails if none does."""
    rows = table[table["name"].str.contains(pattern, regex=True)]
    assert len(rows) > 0, f"no kernel matching {pattern!r} in the trace"
    return dict(zip(rows["name"], rows["phase"]))


def test_the_non_inference_exclusions_name_shipped_traces():
    assert set(NOT_INFERENCE) <= {p.name for p in SHIPPED}
    assert len(INFERENCE) >= 10  # 5 public inference/transformer traces + 6 own H200 traces - 1 toy


@pytest.mark.parametrize("path", INFERENCE, ids=[f"{p.parent.name}/{p.name}" for p in INFERENCE])
def test_other_is_under_one_percent_of_kernel_time_on_every_shipped_inference_trace(tables, path):
    table = tables(path)
    other = table[table["phase"] == "other"]
    assert other["total_ns"].sum() < 0.01 * table["total_ns"].sum(), other[
        ["name", "total_ns"]
    ].to_string()


def test_kv_cache_writes_and_page_indices_are_attention_on_the_b200_and_mi300x_traces(tables):
    b200 = phases_of(tables(B200), r"reshape_and_cache_flash_kernel|^_copy_page_indices_kernel$")
    mi300x = phases_of(tables(MI300X), r"^create_flashinfer_kv_indices_triton$")
    assert len(b200) == 2 and set(b200.values()) == set(mi300x.values()) == {"attention"}


def test_fp4_block_quantisation_on_the_b200_trace_is_elementwise(tables):
    found = phases_of(tables(B200), r"tensorrt_llm::kernels::quantize_with_block_size<")
    assert set(found.values()) == {"elementwise"}


def test_sglang_future_token_and_position_bookkeeping_is_spec_on_the_mi300x_trace(tables):
    found = phases_of(tables(MI300X), r"resolve_future_token_ids_kernel<|clamp_position_kernel<")
    assert len(found) == 2 and set(found.values()) == {"spec"}


def test_rocprim_scans_are_elementwise_like_their_cub_counterparts(tables):
    found = phases_of(tables(MI300X), r"^void rocprim::")
    assert set(found.values()) == {"elementwise"}


def test_inductor_pointwise_kernel_on_the_b200_trace_stays_elementwise(tables):
    found = phases_of(tables(B200), r"^triton_poi_fused_")
    assert set(found.values()) == {"elementwise"}


# Inductor (torch.compile) kernel names. A template (triton_tem_) or a reduction with a bare mm/bmm
# op (Inductor decomposes GEMV-shaped mm into mul+sum, torch/_inductor/decomposition.py `mm`)
# does the matmul. A pointwise kernel named after addmm is only the bias/activation epilogue:
# pytorch/pytorch test/inductor/test_provenance_tracing.py maps triton_poi_fused_addmm_gelu_1 to
# add_tensor + gelu while mm_default runs as extern_kernels.mm.
INDUCTOR = [
    ("triton_tem_fused_mm_0", "gemm_dense"),  # pytorch/pytorch test/inductor/test_profiler.py
    (
        "triton_tem_fused_addmm_0",
        "gemm_dense",
    ),  # Muuuchen/forge .triton_cache/.../torchinductor/model__0_inference_0.0/output_code.py
    (
        "triton_unk_fused_addmm_relu_threshold_backward_0",
        "gemm_dense",
    ),  # tally-project/tally tests/run-triton.py (torch 2.0 template kind 'unk')
    (
        "triton_red_fused_mm_0",
        "gemm_dense",
    ),  # decomposed GEMV (torch/_inductor/decomposition.py, coordinate_descent_tuning)
    ("triton_red_fused_bmm_5", "gemm_dense"),  # decomposed batched GEMV
    (
        "triton_red_fused_mm_rms_norm_split_with_sizes_t_5",
        "gemm_dense",
    ),  # GEMV fused with RMSNorm: the GEMM dominates, not norm
    (
        "triton_poi_fused_addmm_gelu_1",
        "elementwise",
    ),  # pytorch/pytorch test/inductor/test_provenance_tracing.py
    ("triton_poi_fused_mul_0", "elementwise"),  # same file
    (
        "triton_poi_fused_add_cos_sin_0",
        "elementwise",
    ),  # pytorch/pytorch test/inductor/test_profiler.py
    ("triton_for_fused_0", "elementwise"),  # same file: foreach kernel
    (
        "triton_per_fused_add_addmm_native_layer_norm_view_3",
        "norm",
    ),  # LayerNorm + residual + bias epilogue, no matmul
]


@pytest.mark.parametrize(("name", "phase"), INDUCTOR, ids=[n for n, _ in INDUCTOR])
def test_inductor_kernels_that_do_a_matmul_are_gemm_and_the_rest_keep_their_phase(name, phase):
    assert TAXONOMY.phase_of(name) == phase


# MoE routing in triton_kernels (the MXFP4 MoE path of vLLM and SGLang): bare Triton names.
MOE_ROUTING = [
    # triton-lang/triton
    # python/triton_kernels/triton_kernels/routing.py
    "_combined_routing_memset",
    "_combined_routing_compute",  # same file (defined in routing_details/_routing_compute.py)
    # triton-lang/triton
    # python/triton_kernels/triton_kernels/tensor_details/bitmatrix_details/sum_bitmatrix_rows.py
    "_sum_bitmatrix_memset",
    "_sum_bitmatrix_rows",  # same file
    # triton-lang/triton
    # python/triton_kernels/triton_kernels/routing_details/_expt_data.py
    "_expt_data_memset",
    "_expt_data_compute",  # same file
    # triton-lang/triton
    # python/triton_kernels/triton_kernels/topk_details/_topk_forward.py
    "_topk_forward",
]


@pytest.mark.parametrize("name", MOE_ROUTING)
def test_triton_kernels_moe_routing_is_moe_aux(name):
    assert TAXONOMY.phase_of(name) == "moe_aux"


# Sampling and rejection inside verify: names as the kernels are declared, in the demangled form
# nsys/Kineto show (namespace, template arguments that mention cub:: and TopK, which elementwise
# rules also match).
SAMPLING = [
    # sgl-project/sglang sgl-kernel/csrc/speculative/speculative_sampling.cuh
    (
        "void flashinfer::sampling::TreeSpeculativeSamplingTargetOnly<1024u,"
        " (cub::CUB_200200_900_NS::BlockScanAlgorithm)2,"
        " (cub::CUB_200200_900_NS::BlockReduceAlgorithm)0, 1u, true, float, int, long>(int*, int*,"
        " int*, long*)"
    ),
    # flashinfer-ai/flashinfer include/flashinfer/sampling.cuh
    (
        "void flashinfer::sampling::ChainSpeculativeSampling<1024u,"
        " (cub::CUB_200200_900_NS::BlockScanAlgorithm)2,"
        " (cub::CUB_200200_900_NS::BlockReduceAlgorithm)0, 4u, true, float, int>(float*, int*,"
        " float*)"
    ),
    (
        "void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024u,"
        " (cub::CUB_200200_900_NS::BlockScanAlgorithm)2,"
        " (cub::CUB_200200_900_NS::BlockReduceAlgorithm)0, 4u, true, float, int>(float*, int*,"
        " int*, float*)"
    ),
    (
        "void flashinfer::sampling::TopPRenormProbKernel<1024u,"
        " (cub::CUB_200200_900_NS::BlockReduceAlgorithm)0, 4u, float>(float*, float*, float*)"
    ),
    (
        "void flashinfer::sampling::SamplingFromLogitsKernel<1024u, 4u, true, float, int>(float*,"
        " int*)"
    ),
    (
        "void flashinfer::sampling::MinPSamplingFromProbKernel<1024u, 4u, true, float, int>(float*,"
        " int*)"
    ),
    # flashinfer-ai/flashinfer include/flashinfer/topk.cuh (top_k_renorm_prob / top_k_mask_logits)
    (
        "void flashinfer::sampling::RadixTopKRenormProbKernel_MultiCTA<1024u, 4u, false, float,"
        " int>(float*, float*, int*)"
    ),
    (
        "void flashinfer::sampling::RadixTopKMaskLogitsKernel_MultiCTA<1024u, 4u, false, float,"
        " int>(float*, float*, int*)"
    ),
    # flashinfer-ai/flashinfer include/flashinfer/air_top_p.cuh (top_p_renorm_prob)
    "void flashinfer::sampling::AirTopPRenormRadixKernel<float, int, 11, 512>(float*, float*)",
    # vllm-project/vllm vllm/v1/sample/rejection_sampler.py (Triton rejection sampler)
    "rejection_greedy_sample_kernel",
    "rejection_random_sample_kernel",
    "sample_recovered_tokens_kernel",
]


@pytest.mark.parametrize(
    "name", SAMPLING, ids=[re.sub(r"^void flashinfer::sampling::|<.*", "", n) for n in SAMPLING]
)
def test_sampling_and_rejection_kernels_are_the_sampling_phase_not_elementwise_or_spec(name):
    assert TAXONOMY.phase_of(name) == "sampling"


def test_kv_index_builders_of_other_backends_are_attention_but_draft_kv_indices_stay_spec():
    # sgl-project/sglang python/sglang/srt/layers/attention/utils.py defines both builders
    assert TAXONOMY.phase_of("create_flashmla_kv_indices_triton") == "attention"
    # vllm-project/vllm csrc/cache_kernels.cu: the paged-cache write of the non-flash layout and of
    # MLA
    assert (
        TAXONOMY.phase_of(
            "void vllm::reshape_and_cache_kernel<__nv_bfloat16, __nv_bfloat16,"
            " (vllm::Fp8KVCacheDataType)0>(int)"
        )
        == "attention"
    )
    assert (
        TAXONOMY.phase_of(
            "void vllm::concat_and_cache_mla_kernel<__nv_bfloat16, __nv_bfloat16,"
            " (vllm::Fp8KVCacheDataType)0>(int)"
        )
        == "attention"
    )
    # EAGLE draft-decode indices are speculative bookkeeping (spec rules come first)
    assert TAXONOMY.phase_of("generate_draft_decode_kv_indices") == "spec"


QUANT = [
    # flashinfer-ai/flashinfer csrc/nv_internal/tensorrt_llm/kernels/quantization.cuh
    (
        "void tensorrt_llm::kernels::quantize_with_block_size_tma<"
        "(tensorrt_llm::BlockScaleQuantizationType)1,"
        " __nv_bfloat16, 16, false>(int)"
    ),
    "void tensorrt_llm::kernels::cvt_fp16_to_fp4_expert<__nv_bfloat16, false>(int)",
    # flashinfer-ai/flashinfer csrc/nvfp4_attention_sm120/nvfp4_attention_sm120_quantize.cu
    (
        "void scaled_fp4_quant_kernel<128, 16, false, __nv_bfloat16>(__nv_bfloat16 const*, unsigned"
        " char*)"
    ),
    # vllm-project/vllm csrc/quantization/w8a8/fp8/common.cu
    (
        "void vllm::dynamic_per_token_scaled_fp8_quant_kernel<c10::BFloat16,"
        " c10::Float8_e4m3fn>(c10::Float8_e4m3fn*)"
    ),
    # sgl-project/sglang python/sglang/srt/layers/quantization/fp8_kernel.py (Triton)
    "_per_token_group_quant_fp8",
    # triton-lang/triton
    # python/triton_kernels/triton_kernels/numerics_details/mxfp_details/_downcast_to_mxfp.py
    "_downcast_to_mxfp",
]


@pytest.mark.parametrize("name", QUANT, ids=[re.sub(r"^void (\w+::)*|<.*", "", n) for n in QUANT])
def test_fp4_and_fp8_quantisation_kernels_are_elementwise(name):
    assert TAXONOMY.phase_of(name) == "elementwise"


def test_rmsnorm_fused_with_quantisation_stays_norm():
    # aiter's add_rmsnorm_quant_kernel, as in the MI300X trace: norm rules come before quantisation
    assert (
        TAXONOMY.phase_of(
            "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi256ELi16ELb1ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiiiiiib"
        )
        == "norm"
    )
