"""patch("module:qualname", phase): in place, idempotent, lazy on import, never breaking the
host."""

from __future__ import annotations

import importlib
import sys
import textwrap
import warnings

import pytest
import torch  # noqa: F401  (the test command installs it)
from hooks_helpers import forget_modules, profiled

from verifyprof.capture.hooks import api as hooks
from verifyprof.capture.hooks.targets import HookWarning

CORE = """
def sample(x):
    return x * 2

class Runner:
    def forward(self, batch):
        return batch + 1

    @staticmethod
    def plan(n):
        return n * 10

    @classmethod
    def make(cls):
        return cls()

class Base:
    def step(self):
        return "base"

class Sub(Base):
    pass

async def fetch():
    return 1
"""
USER = """
from hookdemo.core import sample

def call_sample(x):
    return sample(x)
"""


@pytest.fixture
def demo(tmp_path, monkeypatch):
    """Two small packages on sys.path: hookdemo (core, user) and otherpkg (a foreign importer)."""
    for package, files in {
        "hookdemo": {
            "__init__.py": "",
            "core.py": CORE,
            "user.py": USER,
            "broken.py": "raise ImportError('boom')\n",
        },
        "otherpkg": {"__init__.py": "", "user.py": USER},
    }.items():
        (tmp_path / package).mkdir()
        for name, text in files.items():
            (tmp_path / package / name).write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield
    hooks.uninstall()
    forget_modules("hookdemo")
    forget_modules("otherpkg")


def test_patch_replaces_a_module_function_in_place(demo):
    core = importlib.import_module("hookdemo.core")
    status = hooks.patch("hookdemo.core:sample", "accept")
    assert status.state == "patched"
    result, ranges = profiled(core.sample, 21)
    assert result == 42
    assert [r.text for r in ranges] == ["verifyprof.accept"]


def test_patching_twice_wraps_once(demo):
    core = importlib.import_module("hookdemo.core")
    hooks.patch("hookdemo.core:sample", "accept")
    first = core.sample
    hooks.patch("hookdemo.core:sample", "accept")
    assert core.sample is first
    assert core.sample.__wrapped__.__name__ == "sample" and not hasattr(
        core.sample.__wrapped__, "__wrapped__"
    )
    _, ranges = profiled(core.sample, 1)
    assert len(ranges) == 1


def test_target_is_patched_when_its_module_is_imported_later(demo):
    assert "hookdemo.core" not in sys.modules
    assert hooks.patch("hookdemo.core:Runner.forward", "verify").state == "pending"
    assert "hookdemo.core" not in sys.modules  # patching did not import it
    core = importlib.import_module("hookdemo.core")
    assert [s.state for s in hooks.status()] == ["patched"]
    result, ranges = profiled(core.Runner().forward, 1)
    assert result == 2
    assert [r.text for r in ranges] == ["verifyprof.verify"]


def test_from_import_after_lazy_patch_binds_the_wrapper(demo):
    hooks.patch("hookdemo.core:sample", "accept")
    user = importlib.import_module("otherpkg.user")  # imports hookdemo.core, then copies sample
    result, ranges = profiled(user.call_sample, 3)
    assert result == 6
    assert [r.text for r in ranges] == ["verifyprof.accept"]


def test_stale_from_import_in_the_same_package_is_rebound(demo):
    user = importlib.import_module("hookdemo.user")  # holds the original before the patch
    status = hooks.patch("hookdemo.core:sample", "accept")
    assert status.bindings == ("hookdemo.user",)
    _, ranges = profiled(user.call_sample, 3)
    assert len(ranges) == 1


def test_stale_from_import_elsewhere_is_rebound_only_when_listed(demo):
    user = importlib.import_module("otherpkg.user")
    hooks.patch("hookdemo.core:sample", "accept")
    assert profiled(user.call_sample, 3)[1] == []
    hooks.patch("hookdemo.core:sample", "accept", bindings=["otherpkg.user"])
    _, ranges = profiled(user.call_sample, 3)
    assert len(ranges) == 1


def test_listed_binding_module_imported_later_gets_the_wrapper(demo):
    importlib.import_module("hookdemo.core")
    hooks.patch("hookdemo.core:sample", "accept", bindings=["otherpkg.user"])
    user = importlib.import_module("otherpkg.user")
    assert len(profiled(user.call_sample, 3)[1]) == 1


def test_missing_target_warns_once_and_does_not_raise(demo):
    importlib.import_module("hookdemo.core")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hooks.patch("hookdemo.core:Runner.backward", "verify")
        hooks.patch("hookdemo.core:Runner.backward", "verify")
    messages = [str(w.message) for w in caught if issubclass(w.category, HookWarning)]
    assert len(messages) == 1
    assert "hookdemo.core:Runner.backward not found" in messages[0]
    assert hooks.status()[0].state == "missing"


def test_missing_target_in_a_module_imported_later_warns_at_import_and_the_import_succeeds(demo):
    hooks.patch("hookdemo.core:gone", "verify")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        core = importlib.import_module("hookdemo.core")
    assert core.sample(1) == 2
    assert sum(issubclass(w.category, HookWarning) for w in caught) == 1


def test_target_whose_module_is_not_importable_yet_stays_pending_without_a_warning(demo):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        status = hooks.patch("no_such_package_xyz.mod:f", "verify")
    assert status.state == "pending" and "not importable yet" in status.detail
    assert [w for w in caught if issubclass(w.category, HookWarning)] == []


def test_pending_target_is_patched_when_a_later_sys_path_entry_makes_its_module_importable(
    demo, tmp_path, monkeypatch
):
    hooks.patch(
        "latemod:step", "verify"
    )  # installed before the folder is on sys.path (a script's own)
    late = tmp_path / "late"
    late.mkdir()
    (late / "latemod.py").write_text("def step(x):\n    return x + 1\n")
    monkeypatch.syspath_prepend(str(late))
    try:
        import latemod

        result, recorded = profiled(latemod.step, 1)
    finally:
        forget_modules("latemod")
    assert result == 2 and [r.text for r in recorded] == ["verifyprof.verify"]
    assert hooks.status()[0].state == "patched"


def test_import_error_of_a_target_module_reaches_the_host_unchanged(demo):
    hooks.patch("hookdemo.broken:f", "verify")
    with pytest.raises(ImportError, match="boom"):
        importlib.import_module("hookdemo.broken")


def test_staticmethod_and_classmethod_keep_their_binding(demo):
    core = importlib.import_module("hookdemo.core")
    hooks.patch("hookdemo.core:Runner.plan", "draft")
    hooks.patch("hookdemo.core:Runner.make", "draft")
    assert isinstance(core.Runner.__dict__["plan"], staticmethod)
    assert isinstance(core.Runner.__dict__["make"], classmethod)
    result, ranges = profiled(
        lambda: (core.Runner.plan(2), core.Runner().plan(3), type(core.Runner.make()))
    )
    assert result == (20, 30, core.Runner)
    assert len(ranges) == 3


def test_inherited_method_is_hooked_on_the_named_class_only(demo):
    core = importlib.import_module("hookdemo.core")
    hooks.patch("hookdemo.core:Sub.step", "verify")
    result, ranges = profiled(core.Sub().step)
    assert result == "base" and len(ranges) == 1
    assert profiled(core.Base().step)[1] == []
    hooks.uninstall()
    assert "step" not in core.Sub.__dict__


def test_coroutine_function_is_left_alone_with_a_warning(demo):
    core = importlib.import_module("hookdemo.core")
    original = core.fetch
    with pytest.warns(HookWarning, match="coroutine"):
        status = hooks.patch("hookdemo.core:fetch", "verify")
    assert status.state == "unsupported"
    assert core.fetch is original


def test_uninstall_restores_every_original_and_binding(demo):
    core = importlib.import_module("hookdemo.core")
    user = importlib.import_module("hookdemo.user")
    original_sample, original_forward = core.sample, core.Runner.__dict__["forward"]
    hooks.patch("hookdemo.core:sample", "accept")
    hooks.patch("hookdemo.core:Runner.forward", "verify")
    hooks.uninstall()
    assert core.sample is original_sample and user.sample is original_sample
    assert core.Runner.__dict__["forward"] is original_forward
    assert hooks.status() == []


def test_preset_targets_absent_from_the_installed_version_are_skipped_silently(demo, tmp_path):
    preset = tmp_path / "demo.toml"
    preset.write_text(
        textwrap.dedent("""
        [[hook]]
        phase = "verify"
        targets = [
            "hookdemo.core:Runner.forward",
            "hookdemo.core:OldRunner.forward",
            "hookdemo.gone:f",
        ]
    """)
    )
    importlib.import_module("hookdemo.core")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        statuses = hooks.install(str(preset))
    assert {s.target: s.state for s in statuses} == {
        "hookdemo.core:Runner.forward": "patched",
        "hookdemo.core:OldRunner.forward": "absent",
        "hookdemo.gone:f": "pending",
    }


def test_check_imports_each_target_module_and_reports_what_this_version_has(demo):
    statuses = hooks.check(["hookdemo.core:Runner.forward=verify", "hookdemo.broken:f=verify"])
    states = {s.target: (s.state, s.detail) for s in statuses}
    assert states["hookdemo.core:Runner.forward"] == ("patched", "")
    assert states["hookdemo.broken:f"] == (
        "missing",
        "cannot import hookdemo.broken: ImportError: boom",
    )
    assert statuses[0].sources == ("user hook hookdemo.core:Runner.forward=verify",)


def test_a_target_a_check_found_absent_is_patched_when_installed_and_imported_later(demo, tmp_path):
    """`hooks check` leaves its targets installed; one whose module was not there then (SGLang not
    yet on the path) must still be wrapped when a later install asks again and it is imported."""
    spec = "hookdemo.late:step=verify"
    assert [s.state for s in hooks.check([spec])] == ["missing"]
    (tmp_path / "hookdemo" / "late.py").write_text("def step(x):\n    return x + 1\n")
    importlib.invalidate_caches()
    assert [s.state for s in hooks.install([spec])] == ["pending"]
    late = importlib.import_module("hookdemo.late")
    result, ranges = profiled(late.step, 1)
    assert result == 2 and [r.text for r in ranges] == ["verifyprof.verify"]
    assert [s.state for s in hooks.status()] == ["patched"]
