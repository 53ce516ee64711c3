"""Check a hook preset against a package's source tree, read with ``ast``, never imported.

Used by the tests on vendored SGLang and transformers sources, and usable on any installed
``site-packages`` to see which preset targets a given version has without importing it (an
SGLang import pulls CUDA extensions). For every target alternative, in a source of version V:

* claimed in V (``since <= V < until``) and absent: the name moved or disappeared;
* present in V but not claimed: the since/until claim is wrong;
* present: the parameters its predicate and extractor read exist in the signature, and every
  claimed binding module really does ``from <module> import <name>``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from verifyprof.capture.hooks.extractors import EXTRACTORS, PREDICATES
from verifyprof.capture.hooks.presets import Preset, claimed
from verifyprof.capture.hooks.search_path import module_file


@dataclass(frozen=True)
class Finding:
    target: str
    problem: str  # "missing" | "unclaimed" | "params" | "binding"
    detail: str

    def __str__(self) -> str:
        return f"{self.target}: {self.problem}: {self.detail}"


class SourceTree:
    """Modules under ``root`` (the directory holding the top-level packages), parsed lazily."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def module_file(self, module: str) -> Path | None:
        return module_file(module, [self.root])

    def tree(self, module: str) -> ast.Module | None:
        path = self.module_file(module)
        return None if path is None else _parse(path)

    def definition(self, module: str, qualname: str) -> ast.AST | None:
        """The ``def``/``class`` (or module-level assignment) named ``qualname``, if the source has
        it."""
        node: ast.AST | None = self.tree(module)
        for part in qualname.split("."):
            if node is None:
                return None
            node = _child(node, part)
        return node

    def imports_name(self, module: str, from_module: str, name: str) -> bool:
        """Whether ``module`` has a top-level ``from from_module import name``."""
        tree = self.tree(module)
        if tree is None:
            return False
        for node in _top_level(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == from_module:
                if any(alias.name == name and alias.asname in (None, name) for alias in node.names):
                    return True
        return False


@cache
def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _top_level(node: ast.AST):
    """Statements of a module or class body, including those under top-level if/try blocks."""
    for stmt in getattr(node, "body", []):
        if isinstance(stmt, (ast.If, ast.Try)):
            yield from _top_level(stmt)
            for handler in getattr(stmt, "handlers", []):
                yield from _top_level(handler)
            for extra in (getattr(stmt, "orelse", []), getattr(stmt, "finalbody", [])):
                yield from _top_level(ast.Module(body=extra, type_ignores=[]))
        else:
            yield stmt


def _child(node: ast.AST, name: str) -> ast.AST | None:
    found = None
    for stmt in _top_level(node):
        if (
            isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and stmt.name == name
        ):
            found = stmt  # the last definition wins, as at run time
        elif isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in stmt.targets
        ):
            found = stmt
    return found


def parameters(node: ast.AST) -> list[str]:
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    args = node.args
    return [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]


def check_preset(preset: Preset, source: SourceTree, version: str) -> list[Finding]:
    """Everything wrong with ``preset``'s claims about the source of ``version``."""
    findings: list[Finding] = []
    for entry in preset.entries:
        needs = [PREDICATES[entry.when]] if entry.when in PREDICATES else []  # not an expression
        if entry.attrs and entry.mode == "call":  # self_forward extractors read the model's forward
            needs.append(EXTRACTORS[entry.attrs])
        for alt in entry.alternatives:
            target = alt.target
            name = str(target)
            node = source.definition(target.module, target.qualname)
            is_claimed = claimed(version, alt.since, alt.until)
            if node is None:
                if is_claimed:
                    where = (
                        "module not found"
                        if source.module_file(target.module) is None
                        else "name not defined"
                    )
                    findings.append(
                        Finding(name, "missing", f"{where} in {version} ({entry.source})")
                    )
                continue
            if not is_claimed:
                findings.append(
                    Finding(
                        name,
                        "unclaimed",
                        f"exists in {version} but claimed since={alt.since} until={alt.until}",
                    )
                )
                continue
            params = parameters(node)
            for need in needs:
                if need.params and not set(need.params) & set(params):
                    findings.append(
                        Finding(
                            name,
                            "params",
                            f"reads one of {need.params}, signature has {params} in {version}",
                        )
                    )
            short = target.qualname.rpartition(".")[2]
            for binding in alt.bindings:
                if not claimed(version, binding.since, binding.until):
                    continue
                if not source.imports_name(binding.module, target.module, short):
                    findings.append(
                        Finding(
                            name,
                            "binding",
                            f"{binding.module} does not import {short} from {target.module} in"
                            f" {version}",
                        )
                    )
    return findings


def present_targets(preset: Preset, source: SourceTree) -> list[str]:
    """``"phase: target"`` for each of the preset's targets this source defines (for reports)."""
    found = {
        f"{entry.phase}: {alt.target}": None
        for entry in preset.entries
        for alt in entry.alternatives
        if source.definition(alt.target.module, alt.target.qualname) is not None
    }
    return list(found)
