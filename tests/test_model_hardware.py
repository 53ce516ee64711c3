"""Hardware specs and model configs are data files: built-in ones load, users add and override."""

from pathlib import Path

import pytest

from verifyprof.contracts.datafiles import BUILTIN
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.model.inputs.hardware import link_named
from verifyprof.pipeline.data_files import load_hardware, load_links, load_model_config
from verifyprof.pipeline.model_files import guess_hardware

HARDWARE = sorted(p.stem for p in (BUILTIN / "hardware").glob("*.toml") if p.stem != "links")
MODELS = sorted(p.stem for p in (BUILTIN / "models").glob("*.toml"))


def test_the_issue_s_hardware_and_models_are_shipped():
    assert {"h100-sxm", "h100-pcie", "h200", "b200", "rtx-pro-6000"} <= set(HARDWARE)
    assert {"kimi-k2", "deepseek-v3", "workload"} <= set(MODELS)
    assert all(
        link_named(load_links(), name).kind
        for name in ("pcie_gen4", "pcie_gen5", "nvlink4", "nvlink5")
    )


@pytest.mark.parametrize("name", HARDWARE)
def test_every_hardware_file_loads_with_a_link_and_positive_roofline(name):
    hw = load_hardware(name)
    assert hw.bandwidth_tbps > 0 and hw.bf16_tflops > 0 and hw.link.kind in ("pcie", "nvlink")


@pytest.mark.parametrize("name", MODELS)
def test_every_model_file_loads_with_positive_sizes(name):
    model = load_model_config(name)
    assert model.non_routed_params > 0 and model.allreduces_per_forward == 2 * model.layers + 1


def test_h200_roofline_matches_reference_6_9():
    h200 = load_hardware("h200")
    assert (h200.bandwidth_tbps, h200.bf16_tflops, h200.link.key) == (4.8, 989, "nvlink4")
    assert h200.bf16_tflops * 1e12 / (h200.bandwidth_tbps * 1e12) == pytest.approx(
        206, abs=1
    )  # ridge FLOP/B


def test_aliases_find_files():
    assert load_hardware("nvidia-h200").name == load_hardware("H200 SXM").name == "H200 SXM"
    assert load_model_config("kimi-k2.6").name == "Kimi-K2"


def test_link_override_changes_the_allreduce_model():
    pcie = load_hardware("h100-sxm", link="pcie_gen5")
    assert pcie.link.kind == "pcie"


def test_trace_gpu_names_are_recognised():
    assert guess_hardware(["NVIDIA H200"]).name == "H200 SXM"
    assert guess_hardware(["NVIDIA B200"]).name == "B200"
    assert (
        guess_hardware(["NVIDIA RTX PRO 6000 Blackwell Server Edition"]).name
        == "RTX PRO 6000 Blackwell"
    )
    assert guess_hardware(["Some Other GPU"]) is None


def test_user_dir_file_shadows_the_built_in_one(tmp_path, monkeypatch):
    (tmp_path / "hardware").mkdir()
    text = (
        (BUILTIN / "hardware" / "h200.toml")
        .read_text()
        .replace("bandwidth_tbps = 4.8", "bandwidth_tbps = 5.0")
    )
    (tmp_path / "hardware" / "h200.toml").write_text(text)
    monkeypatch.setenv("VERIFYPROF_DATA_DIR", str(tmp_path))
    assert load_hardware("h200").bandwidth_tbps == 5.0


def test_user_links_file_adds_a_link(tmp_path, monkeypatch):
    (tmp_path / "hardware").mkdir()
    (tmp_path / "hardware" / "links.toml").write_text(
        '[my_fabric]\nkind = "nvlink"\nbw_gbps = 100.0\nnccl_busbw_gbps = 90.0\nbarrier_us ='
        " 2.0\npeer_read_gbps = 50.0\n"
    )
    monkeypatch.setenv("VERIFYPROF_DATA_DIR", str(tmp_path))
    assert load_hardware("h200", link="my_fabric").link.bw_gbps == 100.0
    assert link_named(load_links(), "nvlink4").kind == "nvlink"  # built-in links stay


def test_unknown_link_lists_the_known_ones():
    with pytest.raises(VerifyprofError, match="unknown link 'infiniband'.*nvlink4"):
        link_named(load_links(), "infiniband")


def test_hardware_file_without_bandwidth_names_the_field(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\n[gpu]\nbf16_tflops = 1.0\n[link]\nname = "pcie_gen5"\n')
    with pytest.raises(VerifyprofError, match="missing field 'bandwidth_tbps'") as err:
        load_hardware(bad)
    assert str(bad) in str(err.value)


def test_model_file_with_an_unknown_dtype_is_rejected(tmp_path):
    bad = tmp_path / "m.toml"
    bad.write_text(
        'name = "m"\nlayers = 1\nhidden = 8\nvocab = 8\n[attention]\nkind = "gqa"\nheads ='
        ' 2\n[dtype]\ndense = "fp12"\n'
    )
    with pytest.raises(VerifyprofError, match="unknown dtype 'fp12'"):
        load_model_config(bad)


def test_missing_file_path_is_named():
    with pytest.raises(VerifyprofError, match="no such hardware file"):
        load_hardware(Path("/nonexistent/box.toml"))


def test_a_link_override_drops_the_tables_measured_over_the_files_own_link():
    assert load_hardware("h200").tables  # custom allreduce measured over NVLink
    assert load_hardware("h200", link="nvlink4").tables == load_hardware("h200").tables
    pcie = load_hardware("h200", link="pcie_gen4")
    assert pcie.tables == ()
    assert "one-shot model" in pcie.allreduce_us(57344, 8, "custom").method
