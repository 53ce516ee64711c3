"""Columnar SQLite reads (ADBC -> numpy) used by the nsys reader."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from verifyprof.trace.nsys import columns as sc


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """50k rows; ``opt`` is NULL for the first 30k rows (ADBC types columns from its first
    batch)."""
    path = tmp_path / "t.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (a INTEGER NOT NULL, opt INTEGER, x REAL, label TEXT)")
    n = 50_000
    con.executemany(
        "INSERT INTO t VALUES (?, ?, ?, ?)",
        (
            (
                i,
                None if i < 30_000 or i % 7 == 0 else i * 3,
                None if i < 30_000 else i / 4,
                None if i < 30_000 else f"r{i}",
            )
            for i in range(n)
        ),
    )
    con.commit()
    con.close()
    return path


def sliced(path: Path, select: str, where: str = "") -> sc.SlicedQuery:
    con = sqlite3.connect(path)
    lo, hi = con.execute("SELECT min(rowid), max(rowid) FROM t").fetchone()
    con.close()
    return sc.SlicedQuery(
        sc.rowid_slices("t", select, where, lo, hi), {"a": ("int64", -1), "opt": ("int64", -1)}
    )


def test_sliced_query_reads_every_row_in_order_with_nulls_filled(db, monkeypatch):
    monkeypatch.setattr(sc, "SLICE_ROWS", 10_000)
    query = sliced(db, "a, opt")
    assert len(query.queries) > 1  # really split
    sc.run_queries(sc.readonly_uri(db), [query])
    rows = query.rows()
    a = rows.take("a", "int64")
    opt = rows.take("opt", "int64")
    i = np.arange(50_000)
    assert (a == i).all()
    assert (opt == np.where((i < 30_000) | (i % 7 == 0), -1, i * 3)).all()


def test_filtered_slices_are_compacted_into_one_column(db, monkeypatch):
    monkeypatch.setattr(sc, "SLICE_ROWS", 10_000)
    query = sliced(db, "a, opt", "a % 3 = 0")
    assert len(query.queries) > 1
    sc.run_queries(sc.readonly_uri(db), [query])
    rows = query.rows()
    assert rows.n == len(range(0, 50_000, 3))
    assert (rows.take("a", "int64") == np.arange(0, 50_000, 3)).all()


def test_columns_typed_late_are_read_after_a_retry(db):
    """REAL and TEXT columns NULL in the first batch make ADBC's type inference fail; the read
    retries."""
    query = sc.TableQuery("SELECT x, label FROM t")
    sc.run_queries(sc.readonly_uri(db), [query])
    rows = query.rows()
    labels = rows.strings("label").to_pylist()
    x = rows.take("x", "float64", fill=np.nan)
    assert np.isnan(x[:30_000]).all() and x[-1] == 49_999 / 4
    assert labels[29_999] is None and labels[30_000] == "r30000"


def test_readonly_uri_never_creates_a_file(tmp_path):
    missing = tmp_path / "absent.sqlite"
    with pytest.raises(Exception):  # noqa: B017 - the driver's own error type
        sc.run_queries(sc.readonly_uri(missing), [sc.TableQuery("SELECT 1")])
    assert not missing.exists()
