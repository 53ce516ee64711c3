"""Each data file is read once per command, and each trace's steps are assigned once: a real
``verifyprof`` process per command, its opens of ``verifyprof/data`` counted by an audit hook and
its ``assign_steps`` calls by a counting wrapper (:mod:`open_counts`). The user's data folder is
an empty one, so that only the built-in files are read."""

from __future__ import annotations

from pathlib import Path

import pytest
from open_counts import counted_run

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "verifyprof" / "data"
FOLDERS = [DATA, *(DATA / kind for kind in ("hardware", "models", "drafters", "hooks"))]
CAPTURE = ROOT / "traces" / "capture-hf-assisted"
BEFORE = ROOT / "traces" / "capture-workload-hooks"
AFTER = ROOT / "traces" / "capture-workload-compile-hooks"
PLAIN = ("--verify-ms", "30", "--accept-len", "2", "--num-draft", "3", "--tp", "8")
GIVEN = ("--hardware", "h200", "--link", "pcie_gen4", "--model", "kimi-k2")

COMMANDS = {
    "breakdown": ("breakdown", str(CAPTURE)),
    "kernels": ("kernels", str(CAPTURE), "--json"),
    "whatif": ("whatif", str(CAPTURE), "--json"),
    "report": ("report", str(CAPTURE), "--json"),
    "compare": ("compare", str(BEFORE), str(AFTER), "--json"),
    "plain-whatif": ("whatif", *PLAIN, *GIVEN, "--json"),
}
# what each command must have read (so that "at most once" is not met by reading nothing)
NEEDED = {
    "breakdown": {"data/taxonomy.toml"},
    "kernels": {"data/taxonomy.toml"},
    "whatif": {"data/taxonomy.toml", "drafters/published.toml", "hardware/h200.toml"},
    "report": {"data/taxonomy.toml", "drafters/published.toml", "hardware/h200.toml"},
    "compare": {"data/taxonomy.toml", "hardware/links.toml"},
    "plain-whatif": {"drafters/published.toml", "hardware/h200.toml", "models/kimi-k2.toml"},
}
TRACES = {"breakdown": 1, "kernels": 1, "whatif": 1, "report": 1, "compare": 2, "plain-whatif": 0}


@pytest.fixture(scope="module", params=sorted(COMMANDS))
def counted(request, tmp_path_factory) -> tuple[str, dict]:
    """One real run of a command with an empty user data folder, its reads counted."""
    user = tmp_path_factory.mktemp("user-data")
    out = tmp_path_factory.mktemp(request.param) / "counts.json"
    env = {"VERIFYPROF_DATA_DIR": str(user)}
    return request.param, counted_run(FOLDERS, out, *COMMANDS[request.param], env=env)


def test_a_command_reads_each_data_file_at_most_once(counted):
    name, found = counted
    assert {f: n for f, n in found["opened"].items() if n > 1} == {}
    assert NEEDED[name] <= set(found["opened"]), found["opened"]


def test_a_command_assigns_each_traces_steps_once(counted):
    name, found = counted
    assert found["assigned"] == TRACES[name]
