"""Seeded mutation of real traces through the real CLI entry: exit 0 or 2, never a traceback,
the input's bytes unchanged.

Mutations (seeded, so a failure replays): byte flips, truncation, and structural edits (JSON:
keys removed, values replaced by lists, strings, nulls, huge numbers, objects; SQLite: columns
dropped or nulled, rows duplicated, rowids moved) of a small Kineto trace (the public MI300X
SGLang decode step) and a small nsys export (the public RTX 3080 export). 48 cases, each a
fraction of a second on these files.
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
import sqlite3
from pathlib import Path

import pytest
from clirun import digest, run_cli
from conftest import PUBLIC

KINETO = PUBLIC / "kineto" / "tracelens_mi300x_sglang_qwen3-8b_decode.json.gz"
NSYS = PUBLIC / "nsys" / "nsysai_mock_rtx3080_nsys2026.1.sqlite"
CASES = 24  # per format
HOSTILE_VALUES = ([1], [], "12", "", None, 1e300, -1e300, 2**70, -1, {"a": 1}, True, [[1.5]])


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VERIFYPROF_CACHE", str(tmp_path / "cache"))


def flip_bytes(data: bytes, rng: random.Random, start: int = 0) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 64)):
        i = rng.randrange(start, len(out))
        out[i] ^= 1 << rng.randrange(8)
    return bytes(out)


def truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(1, len(data))]


def kineto_structural(doc: dict, rng: random.Random) -> dict:
    events = doc["traceEvents"]
    for _ in range(rng.randint(1, 20)):
        event = rng.choice(events)
        target = (
            event.get("args")
            if isinstance(event.get("args"), dict) and rng.random() < 0.4
            else event
        )
        keys = list(target)
        if not keys:
            continue
        key = rng.choice(keys)
        action = rng.random()
        if action < 0.25:
            del target[key]
        elif action < 0.85:
            target[key] = rng.choice(HOSTILE_VALUES)
        else:
            events.append(dict(event))  # a duplicated event
    if rng.random() < 0.1:
        doc[rng.choice(["baseTimeNanoseconds", "distributedInfo", "deviceProperties"])] = (
            rng.choice(HOSTILE_VALUES)
        )
    return doc


def kineto_case(seed: int, folder: Path) -> Path:
    rng = random.Random(seed)
    text = gzip.decompress(KINETO.read_bytes())
    kind = seed % 3
    if kind == 0:
        data = flip_bytes(text, rng)
    elif kind == 1:
        data = truncate(text, rng)
    else:
        data = json.dumps(kineto_structural(json.loads(text), rng)).encode()
    path = folder / "trace.json"
    path.write_bytes(gzip.compress(data) if rng.random() < 0.3 else data)
    if path.read_bytes()[:2] == b"\x1f\x8b":
        path = path.rename(folder / "trace.json.gz")
    return path


def nsys_structural(path: Path, rng: random.Random) -> None:
    con = sqlite3.connect(path)
    tables = [
        t
        for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        if t.startswith(("CUPTI_ACTIVITY_KIND_", "NVTX", "StringIds", "META", "TARGET_INFO"))
    ]
    for _ in range(rng.randint(1, 4)):
        table = rng.choice(tables)
        columns = [c[1] for c in con.execute(f'PRAGMA table_info("{table}")')]
        column = rng.choice(columns)
        action = rng.random()
        try:
            if action < 0.3:
                con.execute(f'ALTER TABLE "{table}" DROP COLUMN "{column}"')
            elif action < 0.5:
                con.execute(f'ALTER TABLE "{table}" RENAME COLUMN "{column}" TO "{column}_renamed"')
            elif action < 0.8:
                value = rng.choice(
                    ["NULL", "-1", "9223372036854775807", "'text'", "1e300", "x'00ff'"]
                )
                con.executescript(
                    f'CREATE TABLE t_copy AS SELECT * FROM "{table}"; DROP TABLE "{table}"; ALTER'
                    f' TABLE t_copy RENAME TO "{table}"; UPDATE "{table}" SET "{column}" = {value}'
                    " WHERE abs(random()) % 3 = 0;"
                )
            elif action < 0.9:
                con.execute(
                    f'UPDATE "{table}" SET rowid = rowid + 4611686018427387904 WHERE rowid ='
                    f' (SELECT max(rowid) FROM "{table}")'
                )
            else:
                con.execute(f'DELETE FROM "{table}"')
        except sqlite3.DatabaseError:
            pass  # the edit is not possible on this column (a key, a constraint): leave it
    con.commit()
    con.close()


def nsys_case(seed: int, folder: Path) -> Path:
    rng = random.Random(seed)
    path = folder / "trace.sqlite"
    kind = seed % 3
    if kind == 0:
        path.write_bytes(flip_bytes(NSYS.read_bytes(), rng, start=100 if rng.random() < 0.8 else 0))
    elif kind == 1:
        path.write_bytes(truncate(NSYS.read_bytes(), rng))
    else:
        shutil.copyfile(NSYS, path)
        nsys_structural(path, rng)
    return path


@pytest.mark.timeout(120)
@pytest.mark.parametrize("seed", range(CASES))
@pytest.mark.parametrize("make", [kineto_case, nsys_case], ids=["kineto", "nsys"])
def test_a_mutated_real_trace_exits_0_or_2_without_a_traceback_and_is_left_unchanged(
    tmp_path, make, seed
):
    folder = tmp_path / "in"
    folder.mkdir()
    path = make(seed, folder)
    before = digest(path)
    result = run_cli("breakdown", path, "--whole-trace")
    assert result.crash is None, f"seed {seed}: {type(result.crash).__name__}: {result.crash}"
    assert result.code in (0, 2), f"seed {seed}: exit {result.code}: {result.text[-500:]}"
    assert "Traceback" not in result.text
    if result.code == 2:
        assert len(result.err.strip().splitlines()) == 1, result.err
    assert digest(path) == before
    assert sorted(p.name for p in folder.iterdir()) == [path.name]
