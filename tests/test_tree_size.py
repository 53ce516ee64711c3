"""The tracked tree stays within 60 MB (issue 43), counted as ``git ls-files -z | xargs -0 du -cb``
counts it: every GPU run carries the working tree (64 MiB at most), and a clone should not be
mostly old captures. Each campaign keeps one raw capture and the rest as their breakdowns
(``bench/summarise_captures.py``); see bench/README.md and traces/README.md for what went."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from conftest import REPO

LIMIT = 60 * 1000 * 1000  # bytes, as du -b counts them


def tracked_sizes() -> dict[str, int]:
    """Bytes of each file ``git ls-files`` lists (a symlink counts as itself, as du counts it)."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: no tracked tree to count")
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    paths = [REPO / name for name in listed.split("\0") if name]
    return {
        str(p.relative_to(REPO)): p.lstat().st_size for p in paths if p.is_symlink() or p.exists()
    }


def test_the_tracked_tree_is_60_mb_or_less():
    sizes = tracked_sizes()
    total = sum(sizes.values())
    largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:8]
    assert total <= LIMIT, (
        f"tracked tree {total / 1e6:.1f} MB > {LIMIT / 1e6:.0f} MB; largest: "
        + (", ".join(f"{name} {size / 1e6:.1f} MB" for name, size in largest))
    )
