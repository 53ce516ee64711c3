"""The benchmarks enter the product as a user's command does (issue 43 item 1): through the
pipeline's one run (``open_run``), never around it into the model. A script that calls the model
itself says it is a model-level micro-benchmark, in its docstring, and why; one that times the
trace readers or the attribution itself, below any run, says it is a stage-level one."""

from __future__ import annotations

import ast
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
MODEL_LEVEL = "model-level micro-benchmark"
STAGE_LEVEL = "stage-level micro-benchmark"


def imports_below(path: Path, stages: tuple[str, ...] = ("model",)) -> bool:
    """Whether ``path`` imports ``verifyprof.model`` (or another of ``stages``; anywhere:
    inside functions too)."""
    below = tuple(f"verifyprof.{s}" for s in stages)
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names = (
            [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
        if any(n in below or n.startswith(tuple(f"{b}." for b in below)) for n in names):
            return True
    return False


def says_level(path: Path, *levels: str) -> bool:
    doc = " ".join(
        (ast.get_docstring(ast.parse(path.read_text(), filename=str(path))) or "").split()
    )
    return any(level in doc for level in (levels or (MODEL_LEVEL,)))


def test_no_bench_script_imports_the_model_unless_its_docstring_says_it_is_model_level():
    offending = [
        p.name for p in sorted(BENCH.glob("*.py")) if imports_below(p) and not says_level(p)
    ]
    assert offending == []


def test_no_bench_script_reads_traces_below_the_run_unless_it_says_it_is_a_micro_benchmark():
    offending = [
        p.name
        for p in sorted(BENCH.glob("*.py"))
        if imports_below(p, ("trace", "attribution"))
        and not says_level(p, MODEL_LEVEL, STAGE_LEVEL)
    ]
    assert offending == []


def test_the_check_sees_a_model_import_inside_a_function(tmp_path):
    script = tmp_path / "bench_x.py"
    script.write_text('"""A bench."""\n\ndef f():\n    from verifyprof.model.fixes import base\n')
    assert imports_below(script) and not says_level(script)
