"""A kernel whose name id names nothing (NULL, or absent from ``StringIds``: a damaged or edited
export) is named from the export's next name column, counted in ``integrity`` and said on
stderr; an export where no kernel has a name is refused. Before, every such kernel was
``<string 999999998>``, classified ``other``, without a word. On a real 2-GPU export."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest
from cli_helpers import verifyprof
from conftest import public_export

EXPORT = public_export("nsysai_mfu_2gpu_after_nsys2026.2.sqlite")
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
DANGLING = 999_999_998  # no StringIds row has this id


def edited(tmp_path, *statements: str):
    path = tmp_path / "edited.sqlite"
    shutil.copyfile(EXPORT, path)
    with sqlite3.connect(path) as con:
        for statement in statements:
            con.executescript(statement)
    return path


def edited_rows(path, where: str) -> int:
    with sqlite3.connect(path) as con:
        return con.execute(f"SELECT count(*) FROM {KERNEL} WHERE {where}").fetchone()[0]


def warnings_of(stderr: str) -> list[str]:
    lines = stderr.strip().splitlines()
    assert all(line.startswith("verifyprof: warning: ") for line in lines), stderr
    return [line for line in lines if "names nothing" in line]


@pytest.fixture
def demangled_dangling(tmp_path):
    """Every third kernel's demangledName points nowhere; its shortName still resolves."""
    return edited(tmp_path, f"UPDATE {KERNEL} SET demangledName = {DANGLING} WHERE rowid % 3 = 0")


def test_a_dangling_name_id_is_named_from_the_short_name_and_counted(demangled_dangling):
    done = verifyprof("kernels", str(demangled_dangling), "--json")
    assert done.returncode == 0, done.stderr
    count = edited_rows(demangled_dangling, f"demangledName = {DANGLING}")
    total = edited_rows(demangled_dangling, "1")
    (line,) = warnings_of(done.stderr)
    assert f"{count} of {total} rows of kernels" in line
    assert f"demangledName id {DANGLING}, not in StringIds; {count} named from shortName" in line
    data = json.loads(done.stdout)
    assert not [k["name"] for k in data["kernels"] if k["name"].startswith("<string")]
    assert "other" not in data["by_phase"] or data["by_phase"]["other"] < 0.5


def test_the_breakdown_json_records_the_unnamed_kernels(demangled_dangling):
    done = verifyprof("breakdown", str(demangled_dangling), "--whole-trace", "--json")
    assert done.returncode == 0, done.stderr
    (record,) = [r for r in json.loads(done.stdout)["trace"]["integrity"] if r["kind"] == "unnamed"]
    assert record["table"] == "kernels"
    assert record["count"] == edited_rows(demangled_dangling, f"demangledName = {DANGLING}")
    assert record["rows"] == edited_rows(demangled_dangling, "1")


def test_a_null_name_id_falls_back_to_the_mangled_name(tmp_path):
    """NULL where the schema allows it (a copy of the table without NOT NULL), and shortName
    dangling too: the mangled name is the one left."""
    path = edited(
        tmp_path,
        f"CREATE TABLE k AS SELECT * FROM {KERNEL}; DROP TABLE {KERNEL};"
        f" ALTER TABLE k RENAME TO {KERNEL};"
        f" UPDATE {KERNEL} SET demangledName = NULL, shortName = {DANGLING} WHERE rowid % 2 = 0",
    )
    done = verifyprof("kernels", str(path), "--json")
    assert done.returncode == 0, done.stderr
    count = edited_rows(path, "demangledName IS NULL")
    (line,) = warnings_of(done.stderr)
    assert f"demangledName NULL; {count} named from mangledName" in line
    names = [k["name"] for k in json.loads(done.stdout)["kernels"]]
    assert not [n for n in names if n.startswith("<string")]
    assert any(n.startswith("_Z") for n in names)  # mangled names, as the export holds them


def test_kernels_no_column_names_stay_unnamed_and_are_said(tmp_path):
    path = edited(
        tmp_path,
        f"UPDATE {KERNEL} SET demangledName = {DANGLING}, shortName = {DANGLING},"
        f" mangledName = {DANGLING} WHERE rowid % 3 = 0",
    )
    done = verifyprof("kernels", str(path), "--json")
    assert done.returncode == 0, done.stderr
    count = edited_rows(path, f"demangledName = {DANGLING}")
    (line,) = warnings_of(done.stderr)
    assert f"{count} left without a name (<string N>)" in line
    unnamed = [k for k in json.loads(done.stdout)["kernels"] if k["name"].startswith("<string")]
    assert [(k["name"], k["count"]) for k in unnamed] == [(f"<string {DANGLING}>", count)]


def test_an_export_where_no_kernel_has_a_name_is_refused(tmp_path):
    path = edited(
        tmp_path,
        f"UPDATE {KERNEL} SET demangledName = {DANGLING}, shortName = {DANGLING},"
        f" mangledName = {DANGLING}",
    )
    for args in (("kernels", str(path)), ("breakdown", str(path), "--whole-trace")):
        done = verifyprof(*args)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert lines == [
            f"verifyprof: error: {path}: no kernel has a name: every kernel's name id"
            " (demangledName, shortName, mangledName) is NULL or absent from StringIds (a"
            " damaged export; export the .nsys-rep again)"
        ]
