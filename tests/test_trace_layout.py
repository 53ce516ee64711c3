"""The trace stage's own layout rules, read from its source (ast): its format subpackages never
import back up, and every name has one definition (the stage order, sizes and forbidden imports of
every stage are tests/test_architecture.py's)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

TRACE = Path(__file__).resolve().parents[1] / "verifyprof" / "trace"


def _modules() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text(), str(p)) for p in sorted(TRACE.rglob("*.py"))}


def _imports(tree: ast.Module) -> list[str]:
    """Every module an import statement names, lazy (function-level) imports included."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
            if node.module == "verifyprof.trace":
                names += [f"verifyprof.trace.{a.name}" for a in node.names]
    return names


def test_format_subpackages_do_not_import_back_up_from_the_trace_package():
    """nsys/ and kineto/ read only their siblings and the shared trace modules below them."""
    upward = ("verifyprof.trace", "verifyprof.trace.sources", "verifyprof.trace.load_trace")
    bad = []
    for path, tree in _modules().items():
        if path.parent == TRACE:
            continue
        bad += [f"{path.relative_to(TRACE)}: {n}" for n in _imports(tree) if n in upward]
    assert not bad


def test_every_top_level_name_in_trace_is_defined_once():
    """No re-export shims and no two functions or constants of one name (e.g. two nesting_depth)."""
    where: dict[str, list[str]] = defaultdict(list)
    for path, tree in _modules().items():
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            else:
                continue
            for name in names:
                if name != "__all__":
                    where[name].append(str(path.relative_to(TRACE)))
    assert {n: f for n, f in where.items() if len(f) > 1} == {}


def test_no_module_in_trace_reexports_what_another_defines():
    """``__all__`` lists only names the module itself defines."""
    bad = []
    for path, tree in _modules().items():
        defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        defined |= {
            t.id
            for n in tree.body
            if isinstance(n, ast.Assign)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                listed = [e.value for e in node.value.elts]
                bad += [
                    f"{path.relative_to(TRACE)}: {n}"
                    for n in listed
                    if n not in defined and path.name != "__init__.py"
                ]
    assert not bad
