"""One data-file lookup for every kind: a file in the user's data directory
($VERIFYPROF_DATA_DIR, else ~/.config/verifyprof) shadows the built-in one of the same name."""

from __future__ import annotations

from pathlib import Path

import pytest

from verifyprof.attribution.taxonomy import load_taxonomy
from verifyprof.capture.hooks.presets import load_preset, resolve_spec
from verifyprof.contracts import datafiles
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.pipeline.data_files import load_hardware, load_model_config

BUILTIN = datafiles.BUILTIN


@pytest.fixture
def user_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("VERIFYPROF_DATA_DIR", str(tmp_path))
    return tmp_path


def _copy(user_dir: Path, relative: str, old: str, new: str) -> Path:
    text = (BUILTIN / relative).read_text()
    assert old in text, f"{relative} no longer holds {old!r}: pick another field"
    target = user_dir / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text.replace(old, new))
    return target


def test_user_hardware_file_shadows_the_built_in_one(user_dir):
    _copy(user_dir, "hardware/h200.toml", "bandwidth_tbps = 4.8", "bandwidth_tbps = 5.5")
    assert load_hardware("h200").bandwidth_tbps == 5.5


def test_user_model_file_shadows_the_built_in_one(user_dir):
    _copy(user_dir, "models/workload.toml", "layers = 16", "layers = 7")
    assert load_model_config("workload").layers == 7


def test_user_hook_preset_shadows_the_built_in_one(user_dir):
    user = _copy(user_dir, "hooks/workload.toml", 'name = "workload"', 'name = "my-workload"')
    preset = load_preset("workload")
    assert (preset.path, preset.name) == (user, "my-workload")


def test_user_hook_preset_of_a_new_name_is_found_by_name(user_dir):
    _copy(user_dir, "hooks/workload.toml", 'name = "workload"', 'name = "mine"')
    (user_dir / "hooks" / "workload.toml").rename(user_dir / "hooks" / "mine.toml")
    assert load_preset("mine").name == "mine"
    assert len(resolve_spec("mine")) == len(load_preset("workload").entries)
    assert (
        load_preset("sglang").path == BUILTIN / "hooks" / "sglang.toml"
    )  # the others stay built-in


def test_unknown_preset_names_the_user_directory(user_dir):
    with pytest.raises(VerifyprofError, match=f"user presets go in {user_dir / 'hooks'}"):
        load_preset("nope")


def test_user_taxonomy_shadows_the_built_in_one(user_dir):
    (user_dir / "taxonomy.toml").write_text('[[rule]]\nphase = "norm"\npatterns = ["nvjet"]\n')
    taxonomy = load_taxonomy()
    assert taxonomy.source == str(user_dir / "taxonomy.toml")
    assert taxonomy.phase_of("nvjet_tst_128x8") == "norm"
    assert load_taxonomy(None).phase_of("ncclDevKernel_AllReduce_Sum_bf16_RING_LL") == "other"


def test_without_user_files_the_built_in_taxonomy_is_used(user_dir):
    taxonomy = load_taxonomy()
    assert taxonomy.source == "builtin"
    assert taxonomy.phase_of("ncclDevKernel_AllReduce_Sum_bf16_RING_LL") == "allreduce"


def test_taxonomy_option_beats_the_user_file(user_dir, tmp_path_factory):
    (user_dir / "taxonomy.toml").write_text('[[rule]]\nphase = "norm"\npatterns = ["nvjet"]\n')
    given = tmp_path_factory.mktemp("given") / "rules.toml"
    given.write_text('[[rule]]\nphase = "gemm_dense"\npatterns = ["nvjet"]\n')
    assert load_taxonomy(given).phase_of("nvjet_tst_128x8") == "gemm_dense"


def test_taxonomy_that_is_not_utf8_is_one_error_naming_the_file(tmp_path):
    bad = tmp_path / "rules.toml"
    bad.write_bytes(b'[[rule]]\nphase = "norm"\npatterns = ["\xff\xfe"]\n')
    with pytest.raises(VerifyprofError, match="not UTF-8") as err:
        load_taxonomy(bad)
    assert str(bad) in str(err.value)
