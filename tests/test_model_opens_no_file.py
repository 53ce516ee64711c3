"""The model opens no file: the pipeline reads the data files and the manifest once and hands the
model what they hold (``model.inputs.given.Given``, the hardware and model config as
dataclasses). Read from the source with ``ast``, like ``test_architecture``."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "verifyprof"

# calls that open a file, by the name called (a function, or a method of anything)
OPENING = {
    "open",
    "read_text",
    "read_bytes",
    "read_toml",
    "read_once",
    "manifest_json",
    "catalogue",
    "locate",
    "search_dirs",
    "load_taxonomy",
    "load",  # json.load, np.load, pickle.load
    "read_csv",
    "read_json",
    "read_parquet",
}
OPENING_MODULES = {"tomllib", "pickle", "shelve", "sqlite3"}


def _called(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def file_reads(path: Path) -> list[str]:
    """``line: what`` for every call, import or name in ``path`` that opens a file; a manifest
    read only with the JSON already read (``read_manifest(..., data=...)``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _called(node)
            if name in OPENING:
                found.append(f"{node.lineno}: calls {name}")
            if name == "read_manifest" and "data" not in {k.arg for k in node.keywords}:
                found.append(f"{node.lineno}: read_manifest without data=")
        elif isinstance(node, ast.Import):
            found += [
                f"{node.lineno}: imports {a.name}"
                for a in node.names
                if a.name.split(".")[0] in OPENING_MODULES
            ]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.split(".")[0] in OPENING_MODULES:
                found.append(f"{node.lineno}: imports {module}")
            found += [f"{node.lineno}: imports {a.name}" for a in node.names if a.name in OPENING]
    return sorted(found, key=lambda where: (int(where.split(":")[0]), where))


def model_file_reads() -> list[str]:
    return [
        f"{p.relative_to(PACKAGE.parent)}:{where}"
        for p in sorted((PACKAGE / "model").rglob("*.py"))
        for where in file_reads(p)
    ]


def test_the_model_opens_no_file():
    assert model_file_reads() == []


def test_the_checker_sees_each_way_of_reading_a_file(tmp_path, monkeypatch):
    fake = tmp_path / "verifyprof" / "model"
    fake.mkdir(parents=True)
    (fake / "reads.py").write_text(
        "import tomllib\n"
        "from verifyprof.contracts.datafiles import read_toml\n"
        "def f(path, o):\n"
        "    json.load(open(path))\n"
        "    path.read_text()\n"
        "    read_manifest(o.manifest)\n"
        "    read_manifest(o.manifest, data={})\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake.parent)
    assert model_file_reads() == [
        "verifyprof/model/reads.py:1: imports tomllib",
        "verifyprof/model/reads.py:2: imports read_toml",
        "verifyprof/model/reads.py:4: calls load",
        "verifyprof/model/reads.py:4: calls open",
        "verifyprof/model/reads.py:5: calls read_text",
        "verifyprof/model/reads.py:6: read_manifest without data=",
    ]
