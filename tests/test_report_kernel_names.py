"""Kernel names in the HTML report as Nsight Systems shortens them: no return type, template
arguments or parameter list; the full name stays on hover."""

from __future__ import annotations

import html

import pytest

from verifyprof.report.figures import HOVER_NAME, kernel_hover
from verifyprof.report.kernel_names import short_kernel_name


@pytest.mark.parametrize(
    ("name", "short"),
    [
        (
            "void cutlass::Kernel<cutlass_80_tensorop_s16816gemm_bf16_64x3_tn>(Params)",
            "cutlass::Kernel",
        ),
        (
            "void at::native::elementwise_kernel<(int)128, (int)4, void at::native::gpu_kernel_impl"
            "_nocast<at::native::BinaryFunctor<float, float, float, at::native::MulFunctor<float>>>"
            "(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)",
            "at::native::elementwise_kernel",
        ),
        (
            "void at::native::<unnamed>::indexSelectSmallIndex<c10::BFloat16, long, (int)-2>"
            "(at::cuda::detail::TensorInfo<T1, T3>)",
            "at::native::indexSelectSmallIndex",
        ),
        (
            "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(T1 *)",
            "multimem_all_reduce_kernel",
        ),
        (
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
        ),
        ("void Functor::operator()<int>(int) const", "Functor::operator()"),
    ],
)
def test_template_arguments_and_parameters_are_elided(name, short):
    assert short_kernel_name(name) == short


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
    assert kernel_hover(name) == "<b>ns::k</b><br>void ns::k&lt;(int)1&gt;(T1 *)"


def test_the_timeline_hover_cuts_a_huge_name_and_breaks_it_into_lines():
    hover = kernel_hover("void ns::k<" + "x" * 2000 + ">()")
    lines = [html.unescape(line) for line in hover.split("<br>")]
    assert lines[0] == "<b>ns::k</b>"
    assert sum(len(line) for line in lines[1:]) == HOVER_NAME and lines[-1].endswith("...")
    assert max(len(line) for line in lines[1:]) <= 100
