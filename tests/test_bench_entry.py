"""The benchmarks enter the product as a user's command does (issue 43 item 1): through the
pipeline's one run (``open_run``), never around it into the model. A script that calls the model
itself says it is a model-level micro-benchmark, in its docstring, and why."""

from __future__ import annotations

import ast
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
MODEL_LEVEL = "model-level micro-benchmark"


def imports_the_model(path: Path) -> bool:
    """Whether ``path`` imports ``verifyprof.model`` (anywhere: inside functions too)."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names = (
            [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
        if any(n == "verifyprof.model" or n.startswith("verifyprof.model.") for n in names):
            return True
    return False


def says_model_level(path: Path) -> bool:
    doc = ast.get_docstring(ast.parse(path.read_text(), filename=str(path))) or ""
    return MODEL_LEVEL in " ".join(doc.split())


def test_no_bench_script_imports_the_model_unless_its_docstring_says_it_is_model_level():
    offending = [
        p.name
        for p in sorted(BENCH.glob("*.py"))
        if imports_the_model(p) and not says_model_level(p)
    ]
    assert offending == []


def test_the_check_sees_a_model_import_inside_a_function(tmp_path):
    script = tmp_path / "bench_x.py"
    script.write_text('"""A bench."""\n\ndef f():\n    from verifyprof.model.fixes import base\n')
    assert imports_the_model(script) and not says_model_level(script)
