"""SGLang general plugin (entry-point group ``sglang.srt.plugins``): installs $VERIFYPROF_HOOKS.

SGLang (since 2026-04, #21388) calls ``load_plugins()`` early in every scheduler/TP process, so
the hooks reach spawned ranks without ``sitecustomize``. Installed verifyprof is discovered by
every SGLang on the machine, so this does nothing unless ``VERIFYPROF_HOOKS`` is set (a capture
sets it). Patching is idempotent, so running after the sitecustomize is harmless.
"""

from __future__ import annotations

import os


def load() -> None:
    """The entry point SGLang calls (its return value is ignored); imports nothing when disabled."""
    if not os.environ.get("VERIFYPROF_HOOKS", "").strip():
        return
    from verifyprof.capture.hooks.api import install_from_env

    install_from_env()
