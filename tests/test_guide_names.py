"""The docs name real code: every constant, function and class a guide or doc (docs/*.md,
docs/guides/*.md) names in backticks exists, and where it says where (`NAME` in `path.py`,
`module/path.name`, `Class.member`), it is there. Read with ``ast``, so that a name renamed or
moved in the code fails here, not in the next engineer's search."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "verifyprof"
DOCS = sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "docs" / "guides").glob("*.md"))
STAGES = "contracts|capture|workload|trace|attribution|model|report|pipeline|cli"

NAME = r"[A-Za-z_]\w*"
# `NAME` in `path.py`, `A`, `B` and `C` in `path.py`, `NAME` (in `path.py`)
LOCATED = re.compile(
    rf"`({NAME})(?:\(\))?`((?:\s*(?:,|and)\s*`{NAME}(?:\(\))?`)*)\s*\(?in\s+"
    r"`((?:verifyprof|tests|bench)/[^`]+\.py)`"
)
# `model/decision/whatif.Prepared`, `verifyprof/pipeline/run.Run.kernels(scope)`
IN_MODULE = re.compile(rf"`((?:verifyprof/)?(?:{STAGES})/[\w/]+)\.({NAME})[^`]*`")
# `Run.kernels`, `VerdictScope.words()`
MEMBER = re.compile(rf"`([A-Z][A-Za-z0-9]+)\.({NAME})(?:\(.*?\))?`")
# a bare constant, call or snake_case name
BARE = re.compile(rf"`([A-Z][A-Z0-9_]{{2,}}|{NAME}(?=\()|[a-z]\w*_\w*)(?:\(.*?\))?`")


def _defs(tree: ast.AST) -> set[str]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
            out.add(n.attr)
        elif isinstance(n, ast.alias):
            out.add((n.asname or n.name).split(".")[-1])
        elif isinstance(n, ast.arg):
            out.add(n.arg)
    return out


@functools.cache
def defined_in(path: Path) -> frozenset[str]:
    return frozenset(_defs(ast.parse(path.read_text(), filename=str(path))))


@functools.cache
def code() -> tuple[frozenset[str], frozenset[str], dict[str, frozenset[str]]]:
    """Every name defined in the package, tests and bench; every word of the package's string
    literals and data files (environment variables, JSON keys, what hook presets patch); each
    package class's members."""
    names, words, classes = set(), set(), {}
    for folder in ("verifyprof", "tests", "bench"):
        for path in (ROOT / folder).rglob("*.py"):
            if "data" in path.relative_to(ROOT).parts[1:2]:
                continue  # tests/data: vendored third-party code
            tree = ast.parse(path.read_text(), filename=str(path))
            names |= defined_in(path)
            for n in ast.walk(tree):
                if folder == "verifyprof" and isinstance(n, ast.Constant):
                    words.update(re.findall(NAME, n.value) if isinstance(n.value, str) else ())
                if folder == "verifyprof" and isinstance(n, ast.ClassDef):
                    classes[n.name] = frozenset(_defs(n)) | classes.get(n.name, frozenset())
    for data in (PACKAGE / "data").rglob("*.toml"):
        words.update(re.findall(NAME, data.read_text()))
    return frozenset(names), frozenset(words), classes


def _module(named: str) -> Path | None:
    rel = named if named.startswith("verifyprof/") else f"verifyprof/{named}"
    for path in (ROOT / f"{rel}.py", ROOT / rel / "__init__.py"):
        if path.is_file():
            return path
    return None


def missing_names(text: str) -> list[str]:
    """Each name ``text`` gives in backticks that the code does not define where it says."""
    text = re.sub(r"\s+", " ", text)
    names, words, classes = code()
    missing = []
    for m in LOCATED.finditer(text):
        path = ROOT / m.group(3)
        for name in [m.group(1), *re.findall(rf"`({NAME})", m.group(2))]:
            if not path.is_file() or name not in defined_in(path):
                missing.append(f"{name} in {m.group(3)}")
    for m in IN_MODULE.finditer(text):
        path = _module(m.group(1))
        if m.group(2) != "py" and (path is None or m.group(2) not in defined_in(path)):
            missing.append(f"{m.group(1)}.{m.group(2)}")
    for m in MEMBER.finditer(text):
        cls, member = m.groups()
        if cls in classes and member not in classes[cls]:
            missing.append(f"{cls}.{member}")
    for m in BARE.finditer(text):
        if m.group(1) not in names and m.group(1) not in words:
            missing.append(m.group(1))
    return missing


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.stem)
def test_every_name_a_doc_gives_exists_where_it_says(doc):
    assert missing_names(doc.read_text()) == []


def test_the_checker_sees_a_gone_name_and_a_moved_one():
    text = (
        "`SMALL` in `verifyprof/model/cycle/parts.py`; `SMALL_KERNEL_PHASES` in\n"
        "`verifyprof/model/cycle/parts.py`; `contracts/schema.group_label`,"
        " `contracts/schema.no_such_thing`; `Run.kernels`, `Run.no_such_member`;"
        " `assign_steps()`, `no_such_function()`, `NO_SUCH_CONSTANT`"
    )
    assert missing_names(text) == [
        "SMALL in verifyprof/model/cycle/parts.py",
        "contracts/schema.no_such_thing",
        "Run.no_such_member",
        "no_such_function",
        "NO_SUCH_CONSTANT",
    ]


ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
LAYERS = ("inputs", "cycle", "fixes", "decision")


def architecture_sections(text: str) -> dict[str, str]:
    """The text of each stage in the first diagram (``trace``: its lines until the next stage)
    and of each model layer in the model's diagram (``model/inputs``, ...)."""
    blocks = re.findall(r"```\n(.*?)```", text, re.S)
    sections: dict[str, str] = {}
    for block, start in ((blocks[0], rf"({STAGES})\b"), (blocks[1], rf"({'|'.join(LAYERS)})/")):
        current = None
        for line in block.splitlines():
            if found := re.match(start, line):
                current = found.group(1) if block is blocks[0] else f"model/{found.group(1)}"
            if current is not None:
                sections[current] = sections.get(current, "") + line + "\n"
    return sections


def unlisted_modules(text: str) -> list[str]:
    """Every module of the package whose name its stage's (or model layer's) section of
    ``docs/ARCHITECTURE.md`` does not give (a package's ``__init__``: the package's name)."""
    sections = architecture_sections(text)
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        if len(parts) == 1 or "inject" in parts or path.stem == "__main__":
            continue
        if path.stem == "__init__" and len(parts) == 2:
            continue  # the stage itself
        key = "/".join(parts[:2]) if parts[0] == "model" and len(parts) > 2 else parts[0]
        name = parts[-2] if path.stem == "__init__" else path.stem
        if not re.search(rf"(?<![\w/.]){re.escape(name)}(?!\w)", sections.get(key, "")):
            out.append("/".join(parts))
    return out


def test_the_architecture_lists_every_module_under_its_stage():
    assert unlisted_modules(ARCHITECTURE.read_text()) == []


def test_the_module_check_sees_a_module_left_out():
    text = ARCHITECTURE.read_text().replace("markup (the HTML's building blocks), ", "")
    assert unlisted_modules(text) == ["report/markup.py"]
