"""Kernel names as Nsight Systems shortens them (its base name: no return type, namespaces,
template arguments or parameter list), keeping the part that tells two kernels apart (the
functor, or short flat template arguments); the full name stays on hover."""

from __future__ import annotations

import html

import pytest

from verifyprof.attribution.kernel_names import short_kernel_name
from verifyprof.report.figures import HOVER_NAME, kernel_hover

MUL = (
    "void at::native::elementwise_kernel<(int)128, (int)4, void at::native::gpu_kernel_impl"
    "_nocast<at::native::BinaryFunctor<float, float, float, at::native::MulFunctor<float>>>"
    "(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)"
)
WHERE = (
    "void at::native::elementwise_kernel<(int)128, (int)4, void at::native::gpu_kernel_impl_nocast"
    "<at::native::<unnamed>::where_kernel_impl(at::TensorIterator &)::[lambda() (instance 1)]::"
    "operator ()() const::[lambda() (instance 3)]::operator ()() const::[lambda(bool, float, float)"
    " (instance 1)]>(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)"
)


@pytest.mark.parametrize(
    ("name", "short"),
    [
        (
            "void cutlass::Kernel<cutlass_80_tensorop_s16816gemm_bf16_64x3_tn>(Params)",
            "Kernel<cutlass_80_tensorop_s16816gemm_bf16_64x3_tn>",
        ),
        (MUL, "elementwise_kernel<…MulFunctor…>"),
        (WHERE, "elementwise_kernel<…where_kernel_impl…>"),
        (
            "void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float,"
            " at::native::ArgMaxOps<float>, unsigned int, long, (int)4, (int)4>>(T3)",
            "reduce_kernel<…ArgMaxOps…>",
        ),
        (
            "void at::native::index_elementwise_kernel<(int)128, (int)4, void at::native::"
            "gpu_index_kernel<void at::native::index_put_kernel_impl<at::native::OpaqueType<"
            "(int)2>>"
            "(at::TensorIterator &, c10::ArrayRef<long>, c10::ArrayRef<long>)::[lambda(char *,"
            " const char *, long) (instance 1)]>(at::TensorIteratorBase &, c10::ArrayRef<long>,"
            " c10::ArrayRef<long>, const T1 &, bool)::[lambda(int) (instance 1)]>(int, T3)",
            "index_elementwise_kernel<…index_put_kernel_impl…>",
        ),
        (
            "void at::native::<unnamed>::indexSelectSmallIndex<c10::BFloat16, long, (int)-2>"
            "(at::cuda::detail::TensorInfo<T1, T3>)",
            "indexSelectSmallIndex<c10::BFloat16, long, -2>",
        ),
        (
            "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(T1 *)",
            "multimem_all_reduce_kernel<c10::BFloat16, 16>",
        ),
        (
            "std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type "
            "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long)",
            "fused_add_rms_norm_kernel<c10::BFloat16, 8>",
        ),
        (
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
        ),
        ("void Functor::operator()<int>(int) const", "Functor::operator()<int>"),
    ],
)
def test_names_are_nsys_base_names_with_what_tells_kernels_apart(name, short):
    assert short_kernel_name(name) == short


def test_kernels_of_one_base_name_keep_distinct_short_names():
    """The six report rows that all read ``at::native::elementwise_kernel`` (issue 27)."""
    add = MUL.replace("at::native::MulFunctor", "at::native::CUDAFunctor_add")
    names = [MUL, WHERE, add]
    assert len({short_kernel_name(n) for n in names}) == len(names)


@pytest.mark.parametrize(
    "name",
    ["nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT", "triton_poi_fused_add_0", "Cijk_Ailk_Bljk_MT64x64"],
)
def test_a_name_without_cpp_syntax_passes_through(name):
    assert short_kernel_name(name) == name


def test_a_name_whose_brackets_never_close_comes_back_whole():
    assert short_kernel_name("void broken<int, (int)3") == "void broken<int, (int)3"


def test_the_timeline_hover_shows_the_short_name_then_the_full_one_escaped():
    name = "void ns::k<(int)1>(T1 *)"
    assert kernel_hover(name) == "<b>k&lt;1&gt;</b><br>void ns::k&lt;(int)1&gt;(T1 *)"


def test_the_timeline_hover_cuts_a_huge_name_and_breaks_it_into_lines():
    hover = kernel_hover("void ns::k<" + "x" * 2000 + ">()")
    lines = [html.unescape(line) for line in hover.split("<br>")]
    assert lines[0] == "<b>k</b>"
    assert sum(len(line) for line in lines[1:]) == HOVER_NAME and lines[-1].endswith("...")
    assert max(len(line) for line in lines[1:]) <= 100
