"""Seeded mutation of real traces through the real CLI: the contract every input meets.

**The contract** (:func:`check`): ``verifyprof breakdown --json`` and ``verifyprof kernels
--json`` exit 0 with sane output (the JSON parses, every step's phases sum to its wall time,
stderr holds only ``verifyprof: warning:`` lines) or exit 2 with exactly one line on stderr,
``verifyprof: error: ...``; never a traceback; the input byte-identical and nothing left beside
it.

**Mutations** (seeded: a failure names its input, seed and edits, and replays): byte flips
anywhere, in the SQLite header or in the schema's CREATE statements; truncation; SQLite rows
duplicated, deleted, set to NULL, text, blobs or huge numbers, columns dropped or renamed, rowids
moved, tables dropped; JSON keys removed, values replaced by lists, text, null, huge or negative
numbers, events duplicated, names given escape sequences, header values of 1e30, nesting
100 000 deep.

**Inputs**: the small public exports and traces by default (``CASES`` seeds each, a few seconds
in all); ``VERIFYPROF_FUZZ=N`` runs N seeds each over every public trace and two bundled
exports too (the slow variant, marked ``slow``). The crashing inputs the fuzzer found are kept
in tests/data/fuzz/ (its README says how each was found) and always run.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_helpers import verifyprof
from clirun import digest
from conftest import OWN_TRACES, PUBLIC, REPO, public_export

CASES = 8  # seeds per input and mutation family in the default run
SLOW = int(os.environ.get("VERIFYPROF_FUZZ", "0") or 0)
CORPUS = REPO / "tests" / "data" / "fuzz"
SMALL = [
    PUBLIC / "nsys" / "nsysai_mock_rtx3080_nsys2026.1.sqlite",
    PUBLIC / "nsys" / "flameox_cudagraph_rtx3060_nsys2025.5.sqlite",
    PUBLIC / "kineto" / "tracelens_mi300x_sglang_qwen3-8b_decode.json.gz",
    OWN_TRACES / "torchrun-2ranks-one-gpu" / "run-TP-0.trace.json.gz",
]
LARGER = [
    *sorted((PUBLIC / "nsys").glob("*.sqlite")),
    *(public_export(p.name.removesuffix(".gz")) for p in sorted((PUBLIC / "nsys").glob("*.gz"))),
    *sorted((PUBLIC / "kineto").glob("*.json.gz")),
    OWN_TRACES / "workload-dense-pipelined-graph" / "trace.sqlite.gz",
    OWN_TRACES / "workload-dense-pipelined-eager" / "trace.sqlite.gz",
]
HOSTILE = ([1], [], "12", "", None, 1e300, -1e300, 2**70, -1, -2.5, {"a": 1}, True, [[1.5]])
SQL_VALUES = (
    "NULL",
    "-1",
    "0",
    "9223372036854775807",
    "-9223372036854775808",
    "4611686018427387904",
    "'text'",
    "'12'",
    "1e300",
    "x'00ff'",
    "999999998",  # an id no StringIds row holds: a dangling name, text or domain
)
ESCAPES = "\x1b]0;fuzz\x07\x1b[2J"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VERIFYPROF_CACHE", str(tmp_path / "cache"))


@dataclass
class Outcome:
    code: int
    out: str
    err: str
    crash: BaseException | None = None


def run(*args: object) -> Outcome:
    """The real CLI in-process (``cli.main``); an exception it lets out is a crash."""
    try:
        done = verifyprof(*map(str, args))
    except Exception as exc:  # noqa: BLE001 - the traceback a user would see
        return Outcome(1, "", "", exc)
    return Outcome(done.returncode, done.stdout, done.stderr)


def check(path: Path, what: str, steps: tuple[tuple[str, ...], ...] = ((),)) -> None:
    """The contract (module doc) for ``kernels`` and ``breakdown`` (once per option set of
    ``steps``: the ranges' steps, ``--whole-trace``) on ``path``."""
    before = digest(path)
    runs = [("kernels", path, "--json")] + [("breakdown", path, *s, "--json") for s in steps]
    for args in runs:
        result = run(*args)
        where = f"{what}: {' '.join(map(str, args[:1] + args[2:]))}"
        assert result.crash is None, f"{where}: {type(result.crash).__name__}: {result.crash}"
        assert "Traceback" not in result.err, f"{where}: {result.err[-800:]}"
        lines = result.err.strip().splitlines()
        if result.code == 2:
            assert len(lines) == 1 and lines[0].startswith("verifyprof: error: "), where
            continue
        assert result.code == 0, f"{where}: exit {result.code}: {result.err[-500:]}"
        assert all(line.startswith("verifyprof: warning: ") for line in lines), result.err
        data = json.loads(result.out)
        for step in data.get("steps", []):
            assert sum(step["phases"].values()) == step["wall_ns"], f"{where}: {step['index']}"
    assert digest(path) == before, f"{what}: the input changed"
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name], f"{what}: files left"


# --- mutations -------------------------------------------------------------------------------


def flip_bytes(data: bytes, rng: random.Random, start: int = 0, end: int | None = None) -> bytes:
    out = bytearray(data)
    end = len(out) if end is None else end
    for _ in range(rng.randint(1, 64)):
        out[rng.randrange(start, end)] ^= 1 << rng.randrange(8)
    return bytes(out)


def schema_flip(data: bytes, rng: random.Random) -> bytes:
    """One byte of a CREATE statement (the schema SQLite parses on every open) flipped."""
    starts = [m.start() for m in re.finditer(rb"CREATE (TABLE|INDEX|VIEW)", data)]
    at = rng.choice(starts) + rng.randrange(0, 80)
    out = bytearray(data)
    out[at] ^= rng.choice((0xFF, 0x80, 0x20, 0x01))
    return bytes(out)


def sql_edits(path: Path, rng: random.Random) -> list[str]:
    """Structural edits of an SQLite copy; returns the statements that took effect."""
    con = sqlite3.connect(path)
    tables = [
        t
        for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        if t.startswith(("CUPTI_ACTIVITY_KIND_", "NVTX", "StringIds", "META", "TARGET", "ANALYSIS"))
    ]
    done = []
    for _ in range(rng.randint(1, 4)):
        table = rng.choice(tables)
        columns = [c[1] for c in con.execute(f'PRAGMA table_info("{table}")')]
        if not columns:  # dropped by an earlier edit
            continue
        column = rng.choice(columns)
        k, r = rng.choice((1, 2, 3, 10, 50)), rng.randrange(0, 3)
        some = f"rowid % {k} = {r % k}"
        statement = rng.choice(
            [
                f'ALTER TABLE "{table}" DROP COLUMN "{column}"',
                f'ALTER TABLE "{table}" RENAME COLUMN "{column}" TO "{column}_x"',
                f'CREATE TABLE t_copy AS SELECT * FROM "{table}"; DROP TABLE "{table}"; ALTER TABLE'
                f' t_copy RENAME TO "{table}"; UPDATE "{table}" SET "{column}" ='
                f" {rng.choice(SQL_VALUES)} WHERE {some}",
                f'INSERT INTO "{table}" SELECT * FROM "{table}" WHERE {some}',
                f'DELETE FROM "{table}" WHERE {some}',
                f'UPDATE "{table}" SET rowid = rowid + 4611686018427387904 WHERE rowid = (SELECT'
                f' max(rowid) FROM "{table}")',
                f'DROP TABLE "{table}"',
            ]
        )
        try:
            con.executescript(statement)
            done.append(statement)
        except sqlite3.DatabaseError:
            con.execute("DROP TABLE IF EXISTS t_copy")  # not possible on this column: left alone
    con.commit()
    con.close()
    return done


def deep(depth: int = 100_000) -> str:
    return "[" * depth + "]" * depth


def json_edits(doc: dict, rng: random.Random) -> dict:
    events = doc["traceEvents"]
    for _ in range(rng.randint(1, 20)):
        event = rng.choice(events)
        args = event.get("args")
        target = args if isinstance(args, dict) and rng.random() < 0.4 else event
        if not target:
            continue
        key = rng.choice(list(target))
        action = rng.random()
        if action < 0.2:
            del target[key]
        elif action < 0.7:
            target[key] = rng.choice(HOSTILE)
        elif action < 0.8:
            events.append(dict(event))  # a duplicated event
        elif action < 0.9:
            event["dur"] = -abs(event.get("dur", 1) if isinstance(event.get("dur"), float) else 1)
        else:
            event["name"] = f"{event.get('name')}{ESCAPES}"
    if rng.random() < 0.15:
        key = rng.choice(["baseTimeNanoseconds", "distributedInfo", "deviceProperties"])
        doc[key] = rng.choice((*HOSTILE, 1e30, 10**30, {"rank": 10**30, "world_size": 10**30}))
    return doc


def mutant(source: Path, seed: int, family: str, folder: Path, plain: Path) -> tuple[Path, str]:
    """The mutant of ``plain`` (``source``, decompressed when it is a gzipped export) for
    (``seed``, ``family``), written in ``folder``, and what was done to it."""
    rng = random.Random(f"{source.name}:{family}:{seed}")
    kineto = ".json" in source.name
    path = folder / ("trace.json" if kineto else "trace.sqlite")
    data = gzip.decompress(source.read_bytes()) if kineto else plain.read_bytes()
    what = f"{source.name} seed {seed} {family}"
    if family == "bytes":
        start = 100 if not kineto and rng.random() < 0.6 else 0
        data = (
            flip_bytes(data, rng, start)
            if rng.random() < 0.7
            else data[: rng.randrange(1, len(data))]
        )
    elif family == "schema" and not kineto:
        data = schema_flip(data, rng)
    elif kineto:
        doc = json.loads(data)
        if rng.random() < 0.1:
            doc["traceEvents"][0]["args"] = {"deep": json.loads(deep(200))}
            data = json.dumps(doc).replace(deep(200), deep()).encode()
        else:
            data = json.dumps(json_edits(doc, rng)).encode()
    path.write_bytes(gzip.compress(data, 1) if kineto and rng.random() < 0.3 else data)
    if kineto and path.read_bytes()[:2] == b"\x1f\x8b":
        path = path.rename(folder / "trace.json.gz")
    if family == "rows" and not kineto:
        what += f": {sql_edits(path, rng)}"
    return path, what


@pytest.fixture(scope="session")
def plain_copies(tmp_path_factory):
    """Each gzipped export decompressed once (mutants are edited copies of it)."""
    folder = tmp_path_factory.mktemp("plain")

    def plain(source: Path) -> Path:
        if not source.name.endswith(".sqlite.gz"):
            return source
        path = folder / f"{source.parent.name}.sqlite"
        if not path.exists():
            path.write_bytes(gzip.decompress(source.read_bytes()))
        return path

    return plain


def cases(inputs: list[Path], seeds: int) -> list:
    return [
        pytest.param(source, seed, family, id=f"{source.parent.name}/{source.name}-{family}-{seed}")
        for source in inputs
        for family in ("bytes", "schema", "rows")
        if not (family == "schema" and ".json" in source.name)
        for seed in range(seeds)
    ]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("source, seed, family", cases(SMALL, CASES))
def test_a_mutated_real_trace_meets_the_contract(tmp_path, plain_copies, source, seed, family):
    folder = tmp_path / "in"
    folder.mkdir()
    path, what = mutant(source, seed, family, folder, plain_copies(source))
    check(path, what, (("--whole-trace",) if seed % 2 else (),))


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.skipif(not SLOW, reason="the slow fuzz: VERIFYPROF_FUZZ=<seeds per input>")
@pytest.mark.parametrize("source, seed, family", cases(LARGER, SLOW) if SLOW else [])
def test_a_mutated_larger_trace_meets_the_contract(tmp_path, plain_copies, source, seed, family):
    folder = tmp_path / "in"
    folder.mkdir()
    path, what = mutant(source, seed + CASES, family, folder, plain_copies(source))
    check(path, what, (("--whole-trace",) if seed % 2 else (),))


@pytest.mark.parametrize(
    "found",
    sorted(p for p in CORPUS.iterdir() if p.name != "README.md") if CORPUS.is_dir() else [],
    ids=lambda p: p.name,
)
def test_every_input_the_fuzzer_once_crashed_on_meets_the_contract(tmp_path, found):
    """The regression corpus: each once ended in a traceback (tests/data/fuzz/README.md)."""
    folder = tmp_path / "in"
    folder.mkdir()
    name = found.name.removesuffix(".gz") if found.name.endswith(".sqlite.gz") else found.name
    path = folder / name
    if name != found.name:
        path.write_bytes(gzip.decompress(found.read_bytes()))
    else:
        shutil.copyfile(found, path)
    check(path, f"corpus {found.name}", ((), ("--whole-trace",)))


def test_the_corpus_is_documented_file_by_file():
    listed = (CORPUS / "README.md").read_text()
    assert [
        p.name for p in sorted(CORPUS.iterdir()) if p.name != "README.md" and p.name not in listed
    ] == []
