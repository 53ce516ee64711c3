"""Shared fixtures: where the public real traces and the project's own traces live."""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PUBLIC = REPO / "tests" / "data" / "public"  # copies of ../shared/traces/public, with PROVENANCE.md
OWN_TRACES = REPO / "traces"
# the head of a real .nsys-rep (tests/data/nsys_rep/README.md): without nsys no byte of it is read
NSYS_REP_HEAD = REPO / "tests" / "data" / "nsys_rep" / "capture-hf-assisted.head.nsys-rep"
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/ helpers (tracebuilder, ...)

import bytecode_prefix  # noqa: E402 - a tests/ helper, on the path from the line above

# A runner that starts the suite in the background or under nohup hands every process an ignored
# SIGINT / SIGHUP, which children inherit: the tests that stop real processes with Ctrl-C or a
# hang-up
# would then test the runner, not verifyprof. Give this process (and so its children) the defaults.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


bytecode_prefix.outside_the_tree()  # before xdist starts the workers (tests/bytecode_prefix.py)


def interruptible() -> None:
    """``preexec_fn`` of a child a test sends Ctrl-C: SIGINT reaches it whatever the runner (a
    suite started as a background job, ``&`` in a script or a CI step, hands every child SIGINT
    ignored, and the child then never stops), not only after the reset above."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(autouse=True)
def no_hooks_left_installed():
    """Each test ends with no verifyprof hooks installed: a command run in-process (``hooks``)
    leaves what it checked installed, as its own process would end right after, and the next
    file's tests in this worker must start as a fresh process does."""
    yield
    hooks = sys.modules.get("verifyprof.capture.hooks.api")
    if hooks is not None and hooks.status():
        hooks.uninstall()


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """How ``--dist loadgroup`` (pyproject's addopts) hands the tests to the workers: tests that
    share one of this suite's module-, class- or session-scoped fixtures (one fixture value: a
    parametrized fixture's each param apart) go to one worker as one group, so that value is made
    once; every other test is a unit of its own, so a file of slow real processes spreads over
    every worker instead of ending last on one. xdist sends the largest groups first."""
    first: dict[str, int] = {}  # a shared fixture value's key -> the first test holding it
    parent = list(range(len(items)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, item in enumerate(items):
        for key in _shared_values(item):
            j = first.setdefault(key, i)
            parent[root(i)] = root(j)
    members: dict[int, list[int]] = {}
    for i in range(len(items)):
        members.setdefault(root(i), []).append(i)
    for n, group in enumerate(g for g in members.values() if len(g) > 1):
        name = f"shares-{items[group[0]].path.stem}-{n}"
        for i in group:
            items[i].add_marker(pytest.mark.xdist_group(name))


def _shared_values(item: pytest.Item) -> list[str]:
    """Keys of the fixture values wider than one test that ``item`` uses: this suite's own
    fixtures (pytest's and plugins' ones, such as ``tmp_path_factory``, cost nothing to share)."""
    info = getattr(item, "_fixtureinfo", None)
    callspec = getattr(item, "callspec", None)
    keys = []
    for name in info.names_closure if info is not None else ():
        defs = info.name2fixturedefs.get(name)
        fixture = defs[-1] if defs else None
        if fixture is None or fixture.scope == "function" or not fixture.baseid:
            continue
        where = {"module": str(item.path), "class": item.nodeid.rsplit("::", 1)[0]}
        param = callspec.indices.get(name) if callspec is not None else None
        keys.append(f"{where.get(fixture.scope, '')}::{name}[{param}]")
    return keys


def public_export(name: str) -> Path:
    """The public nsys export ``name`` (``*.sqlite``) as a SQLite file, for the tests that query,
    edit or split it with sqlite3: the larger ones are tracked gzipped (``name.gz``, issue 43: the
    tracked tree <= 60 MB; verifyprof reads them as they are), so those are decompressed once per
    version into the temp dir, under the same name (the labels and ids a test sees stay)."""
    path = PUBLIC / "nsys" / name
    packed = path.with_name(f"{name}.gz")
    if path.is_file() or not packed.is_file():
        return path
    stat = packed.stat()
    folder = Path(tempfile.gettempdir()) / f"verifyprof-public-{os.getuid()}"
    out = folder / f"{stat.st_size}-{stat.st_mtime_ns}" / name
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{name}.{os.getpid()}.tmp")
        with gzip.open(packed, "rb") as src, tmp.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        os.replace(tmp, out)  # atomic: xdist workers may unpack it at once
    return out


def public_traces(kind: str) -> list[Path]:
    folder = PUBLIC / kind
    return sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []


@pytest.fixture(scope="session")
def public_dir() -> Path:
    if not PUBLIC.is_dir():
        pytest.fail(f"public traces missing at {PUBLIC}")
    return PUBLIC


@pytest.fixture(scope="session")
def b200_whole_breakdown_json() -> str:
    """`verifyprof breakdown <B200 trace> --whole-trace --json` as printed: computed once per
    session
    for the tests that read it (whatif from a breakdown file, the collective sizes it carries)."""
    from cli_helpers import verifyprof

    done = verifyprof(
        "breakdown",
        str(PUBLIC / "kineto" / "tracelens_b200_vllm_moe_eager_trace.json.gz"),
        "--whole-trace",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def tag():
    """A tag put in the environment of every process a capture test starts; whatever still carries
    it when the test ends is killed, so no test leaves a server behind."""
    from capture_helpers import kill_tagged, new_tag

    value = new_tag()
    yield value
    kill_tagged(value)


def in_threads(fn, n: int) -> tuple[list, list]:
    """Runs ``fn()`` in ``n`` threads at once: (results, exceptions), for the concurrency tests."""
    import threading

    results, errors = [], []

    def run() -> None:
        try:
            results.append(fn())
        except Exception as exc:  # noqa: BLE001 (collected for the test to assert on)
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors


@pytest.fixture(scope="session")
def shared_run():
    """One resolved run per input and options per test session (per worker): tests that only
    read a run's answers (its ranking, verdict, group, frame) share it, so each input is read,
    broken down and ranked once. A test that changes what it is given makes its own run."""
    from verifyprof import pipeline

    made: dict[tuple, pipeline.Run] = {}

    def run_of(source, **options):
        key = (str(source), tuple(sorted(options.items())))
        if key not in made:
            made[key] = pipeline.open_run([str(source)], pipeline.WhatifOptions(**options))
        return made[key]

    return run_of
