"""A declared dependency missing from the environment (the H200 image lacks adbc-driver-sqlite)
is named as such: one line naming the package, exit 2, not "corrupt export"."""

from __future__ import annotations

import os
import subprocess
import sys

from test_nsys_reader import MOCK, fingerprint, needs_public

BLOCK_ADBC = """
import sys
class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "adbc_driver_sqlite":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Missing())
sys.argv = ["verifyprof", "breakdown", sys.argv[1]]
import runpy
runpy.run_module("verifyprof.cli", run_name="__main__")
"""


@needs_public
def test_a_missing_sqlite_driver_is_named_as_the_package_to_install(tmp_path):
    before = fingerprint(MOCK)
    done = subprocess.run(
        [sys.executable, "-c", BLOCK_ADBC, str(MOCK)],
        capture_output=True,
        text=True,
        env={**os.environ, "VERIFYPROF_CACHE": str(tmp_path)},
        timeout=120,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "pip install adbc-driver-sqlite" in lines[0] and "corrupt" not in lines[0]
    assert str(MOCK) in lines[0]
    assert fingerprint(MOCK) == before
