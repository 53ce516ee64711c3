"""Short kernel names on a real trace tell its kernels apart: CUTLASS's ``cutlass::Kernel<config>``
kernels, whose base name is the generic ``Kernel``, and the mangled ``_ZN19cutlass_cudnn_train6
Kernel…`` names Kineto recorded for cuDNN's own CUTLASS kernels (review finding 10, issue 27)."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess

import pytest
from cli_helpers import verifyprof
from conftest import PUBLIC

from verifyprof.attribution.kernel_names import mangled_short_name, short_kernel_name

HTA = PUBLIC / "kineto" / "hta_nccl_data_a100_rank0of2.json.gz"


@pytest.fixture(scope="module")
def top_kernels() -> list[dict]:
    done = verifyprof("kernels", str(HTA), "--whole-trace", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["kernels"]


@pytest.fixture(scope="module")
def mangled() -> list[str]:
    with gzip.open(HTA, "rt") as f:
        events = json.load(f)["traceEvents"]
    return sorted({e["name"] for e in events if e.get("cat") == "kernel" and e["name"][:2] == "_Z"})


def test_the_top_kernels_of_the_trace_keep_distinct_short_names(top_kernels):
    full = {k["name"] for k in top_kernels}
    short = {k["short_name"] for k in top_kernels}
    assert len(full) == len(top_kernels) == 30
    assert len(short) == len(full)
    assert sum(s.startswith("Kernel<") for s in short) >= 7  # the rows that all read "Kernel"


def test_no_short_name_is_a_mangled_one(top_kernels, mangled):
    assert len(mangled) == 2 and any(k["name"] in mangled for k in top_kernels)
    assert not [k["short_name"] for k in top_kernels if k["short_name"].startswith("_Z")]
    shorts = [short_kernel_name(name) for name in mangled]
    assert not [s for s in shorts if s.startswith("_Z")]
    assert len(set(shorts)) == len(mangled)


def test_the_console_shows_the_short_names_of_the_json(top_kernels):
    done = verifyprof("kernels", str(HTA), "--whole-trace", env={"COLUMNS": "300"})
    assert done.returncode == 0, done.stderr
    rows = [line.rstrip() for line in done.stdout.splitlines()]
    assert [
        k["short_name"] for k in top_kernels if not any(r.endswith(k["short_name"]) for r in rows)
    ] == []
    assert "_ZN" not in done.stdout


def test_without_a_demangler_the_mangled_names_read_as_their_demangled_short_names(mangled):
    assert [mangled_short_name(n) for n in mangled] == [
        "Kernel<…ImplicitGemmConvolution…GemmShape<128, 128, 32>…>",
        "Kernel<…ImplicitGemmConvolution…GemmShape<64, 128, 32>…>",
    ]


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="binutils' c++filt is not installed")
def test_the_fallback_agrees_with_cxxfilt(mangled):
    done = subprocess.run(
        ["c++filt", "--no-recurse-limit"],
        input="\n".join(mangled) + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    demangled = done.stdout.splitlines()
    assert all(d.startswith("void cutlass_cudnn_train::Kernel<") for d in demangled)
    assert [short_kernel_name(d) for d in demangled] == [mangled_short_name(n) for n in mangled]
    assert [short_kernel_name(n) for n in mangled] == [mangled_short_name(n) for n in mangled]


@pytest.mark.parametrize(
    ("name", "short"),
    [
        (  # one flat argument, a configuration's name longer than KEPT_ARGS: kept whole
            "void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688dgrad_optimized_tf32_128x128_"
            "16x4_nhwc_unity_stride_align4>(cutlass_tensorop_s1688dgrad_optimized_tf32_128x128_"
            "16x4_nhwc_unity_stride_align4::Params)",
            "Kernel<cutlass_tensorop_s1688dgrad_optimized_tf32_128x128_16x4_nhwc_unity_stride_align4>",
        ),
        (  # a generic base name with nested arguments: first template, first flat template
            "void cutlass_cudnn_train::Kernel<cutlass_cudnn_train::reduction::kernel::ReduceSplitK<"
            "cutlass_cudnn_train::MatrixShape<4, 128>, cutlass_cudnn_train::epilogue::thread::"
            "LinearCombination<float, 4, float, float, (cutlass_cudnn_train::epilogue::thread::"
            "ScaleType::Kind)0, (cutlass_cudnn_train::FloatRoundStyle)2>, cutlass_cudnn_train::"
            "reduction::thread::ReduceAdd<float, float, 4>, 4>>(cutlass_cudnn_train::reduction::"
            "kernel::ReduceSplitK<cutlass_cudnn_train::MatrixShape<4, 128>>::Params)",
            "Kernel<…ReduceSplitK…MatrixShape<4, 128>…>",
        ),
        (  # GCC's spelling of a lambda: {lambda(float)#1}
            "void at::native::vectorized_elementwise_kernel<4, at::native::neg_kernel_cuda(at::"
            "TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#7}::operator()() "
            "const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::neg_kernel_"
            "cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#7}::"
            "operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)",
            "vectorized_elementwise_kernel<…neg_kernel_cuda…>",
        ),
        (  # nested but short once namespaces go: kept
            "void at::native::(anonymous namespace)::CatArrayBatchedCopy_aligned16_contig<at::"
            "native::(anonymous namespace)::OpaqueType<8u>, unsigned int, 1, 128, 1>(at::native::"
            "(anonymous namespace)::OpaqueType<8u>*, unsigned int)",
            "CatArrayBatchedCopy_aligned16_contig<OpaqueType<8u>, unsigned int, 1, 128, 1>",
        ),
        (  # flat, at most KEPT_ARGS with its namespaces (demangled from the MI300X trace)
            "void aiter::add_rmsnorm_quant_kernel<std::bfloat16_t, std::bfloat16_t, 256, 16, false,"
            " false, true, 1>(std::bfloat16_t*, float*, double, int, bool)",
            "add_rmsnorm_quant_kernel<std::bfloat16_t, std::bfloat16_t, 256, 16, false, false,"
            " true, 1>",
        ),
        (  # flat and too long with its namespaces: kept without them
            "void aiter::add_rmsnorm_quant_kernel<cutlass::bfloat16_t, cutlass::bfloat16_t, 256,"
            " 16, false, false, true, 1>(float*)",
            "add_rmsnorm_quant_kernel<bfloat16_t, bfloat16_t, 256, 16, false, false, true, 1>",
        ),
        (  # a single word past KEPT_WORD is not kept
            "void cutlass::Kernel2<" + "w" * 120 + ">(Params)",
            "Kernel2",
        ),
    ],
)
def test_generic_and_gcc_spelled_names(name, short):
    assert short_kernel_name(name) == short
