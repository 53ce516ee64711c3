"""The layout is a rule, not a habit: one package per stage, data flowing one way.

Read from the source with ``ast`` (every import, including those inside functions), so a new
arrow running backwards fails here before anyone has to notice it in review.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "verifyprof"

# Left to right. A stage imports only itself and stages to its left; siblings (same rank) not each
# other.
STAGES: dict[str, int] = {
    "contracts": 0,
    "capture": 1,
    "workload": 1,
    "trace": 2,
    "attribution": 3,
    "model": 4,
    "report": 5,
    "pipeline": 6,
    "cli": 7,
}
ANALYSIS = ("contracts", "trace", "attribution", "model", "pipeline")
# The NVTX emitter runs inside the profiled program (capture hooks, the workload), where torch is:
# it falls back to torch's NVTX binding. Nothing of the analysis imports it.
HOST_SIDE = ("contracts/plumbing/nvtx.py",)
NOT_IN_ANALYSIS = ("rich", "plotly", "torch", "matplotlib", "typer")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "inject" not in p.parts)


def stage_of(path: Path) -> str | None:
    rel = path.relative_to(PACKAGE)
    head = rel.parts[0].removesuffix(".py")
    return head if head in STAGES else None


def imported(path: Path) -> list[tuple[str, int]]:
    """(module name, line) of every import in ``path``, relative imports resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = ".".join(("verifyprof", *path.relative_to(PACKAGE).parent.parts))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            out.append((name, node.lineno))
            if name in ("verifyprof", *(f"verifyprof.{s}" for s in STAGES)):
                out += [(f"{name}.{alias.name}", node.lineno) for alias in node.names]
    return out


def target_stage(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "verifyprof" and parts[1] in STAGES else None


def backward_imports() -> list[str]:
    found = []
    for path in modules():
        stage = stage_of(path)
        if stage is None:
            continue
        for name, line in imported(path):
            target = target_stage(name)
            if target is None or target == stage:
                continue
            if STAGES[target] >= STAGES[stage]:
                found.append(
                    f"{path.relative_to(PACKAGE.parent)}:{line}: {stage} imports {name} ({target})"
                )
    return found


def test_every_stage_imports_only_stages_to_its_left():
    assert backward_imports() == []


def test_every_module_belongs_to_a_stage():
    loose = [
        str(p.relative_to(PACKAGE))
        for p in modules()
        if stage_of(p) is None and p.name != "__init__.py" and p.parent == PACKAGE
    ]
    assert loose == []


CLI_REACHES = ("pipeline", "report", "contracts", "cli")


def test_the_cli_imports_only_the_pipeline_the_report_and_the_contracts():
    """The pipeline is the one entry: the CLI parses, calls it and prints through the report."""
    offending = [
        f"{p.relative_to(PACKAGE.parent)}:{line}: {name}"
        for p in (PACKAGE / "cli").rglob("*.py")
        for name, line in imported(p)
        if target_stage(name) is not None and target_stage(name) not in CLI_REACHES
    ]
    assert offending == []


def test_no_cli_module_hands_its_parameters_on_as_locals():
    """A command builds its options keyword by keyword (issue 43), so that each option can be
    followed from its parameter to the model; ``locals()`` (or ``vars()``) matched to fields by
    name hides where each goes."""
    offending = [
        f"{p.relative_to(PACKAGE.parent)}:{node.lineno}"
        for p in sorted((PACKAGE / "cli").rglob("*.py"))
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and (node.func.id == "locals" or (node.func.id == "vars" and not node.args))
    ]
    assert offending == []


def test_the_model_never_reads_traces_or_runs_attribution():
    offending = [
        f"{p.relative_to(PACKAGE.parent)}: {name}"
        for p in (PACKAGE / "model").rglob("*.py")
        for name, _ in imported(p)
        if target_stage(name) in ("trace", "attribution")
    ]
    assert offending == []


@pytest.mark.parametrize("stage", ANALYSIS)
def test_analysis_never_imports_plotting_rich_or_torch(stage):
    paths = (
        [PACKAGE / f"{stage}.py"]
        if (PACKAGE / f"{stage}.py").exists()
        else sorted((PACKAGE / stage).rglob("*.py"))
    )
    paths = [p for p in paths if str(p.relative_to(PACKAGE)) not in HOST_SIDE]
    offending = [
        f"{p.relative_to(PACKAGE.parent)}:{line}: {name}"
        for p in paths
        for name, line in imported(p)
        if name.split(".")[0] in NOT_IN_ANALYSIS
    ]
    assert offending == []


def test_importing_the_whole_analysis_pipeline_loads_no_plotting_rich_or_torch():
    probe = (
        "import sys, verifyprof.pipeline,"
        f" verifyprof.contracts.plumbing.nvtx; print(sorted(m for m in {NOT_IN_ANALYSIS!r} if m in"
        " sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_no_module_is_over_400_lines():
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in modules()
        if (n := p.read_text().count("\n")) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_is_over_80_lines():
    long = {}
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = node.end_lineno - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(PACKAGE)}:{node.name}"] = size
    assert long == {}


# Module file names that may repeat under verifyprof/, each with why: a module's name says what it
# holds, so that "compare.py" or "inputs.py" never leaves a reader asking which one.
SHARED_NAMES = {
    "reader.py": "trace/nsys and trace/kineto: each format's entry point, one role in each package",
}


def repeated_names(root: Path) -> dict[str, list[str]]:
    """Each module file name (``__init__`` and ``__main__`` aside) that two or more modules under
    ``root`` have, with their paths."""
    by_name: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        if path.name not in ("__init__.py", "__main__.py"):
            by_name.setdefault(path.name, []).append(path.relative_to(root).as_posix())
    return {name: paths for name, paths in by_name.items() if len(paths) > 1}


def test_no_two_modules_share_a_name_unless_listed_with_a_reason():
    repeated = repeated_names(PACKAGE)
    assert {name: paths for name, paths in repeated.items() if name not in SHARED_NAMES} == {}
    assert sorted(set(SHARED_NAMES) - set(repeated)) == []  # listed, but no longer repeated


def test_the_name_check_sees_a_repeated_module_name(tmp_path):
    for folder in ("trace", "report"):
        (tmp_path / folder).mkdir()
        for name in ("__init__.py", "files.py"):
            (tmp_path / folder / name).write_text("")
    (tmp_path / "trace" / "reader.py").write_text("")
    assert repeated_names(tmp_path) == {"files.py": ["report/files.py", "trace/files.py"]}


def test_the_checker_sees_a_backward_import(tmp_path, monkeypatch):
    """The rule can fail: a trace module importing the model is reported."""
    fake = tmp_path / "verifyprof"
    (fake / "trace").mkdir(parents=True)
    (fake / "trace" / "bad.py").write_text(
        "from verifyprof.model.inputs.profile import verify_profile\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    assert backward_imports() == [
        "verifyprof/trace/bad.py:1: trace imports verifyprof.model.inputs.profile (model)"
    ]


# Inside the model, layers left to right as the stages are: what is asked and measured, the cycle,
# the fixes, the decision. A layer imports only itself and layers to its left.
MODEL_LAYERS: dict[str, int] = {"inputs": 0, "cycle": 1, "fixes": 2, "decision": 3}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Each module of the package -> the package's modules it imports (inside functions too).

    ``from verifyprof.pipeline import reading`` is an arrow to ``pipeline.reading``, not to the
    package; a name that is not a module is an arrow to the module that holds it."""
    known = {module_name(p): p for p in modules()}
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        found = imported(path)
        targets = set()
        for target, line in found:
            if any(o.startswith(f"{target}.") and o in known and n == line for o, n in found):
                continue  # the package of a module imported by the same statement
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
        graph[name] = targets
    return graph


def import_cycles() -> list[str]:
    """Every circle of modules importing each other (strongly connected components), as text."""
    graph = import_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                circles.append(" <-> ".join(sorted(component)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def model_layer(name: str) -> str | None:
    parts = name.split(".")
    if parts[:2] != ["verifyprof", "model"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in MODEL_LAYERS else None


def backward_model_imports() -> list[str]:
    found = []
    for name, targets in import_graph().items():
        layer = model_layer(name)
        if layer is None:
            continue
        for target in sorted(targets):
            other = model_layer(target)
            if other is not None and MODEL_LAYERS[other] > MODEL_LAYERS[layer]:
                found.append(f"{name} ({layer}) imports {target} ({other})")
    return found


def test_no_module_import_circle_anywhere_in_the_package():
    assert import_cycles() == []


def test_every_model_layer_imports_only_layers_to_its_left():
    assert backward_model_imports() == []


def test_every_model_module_belongs_to_a_layer():
    loose = [
        str(p.relative_to(PACKAGE))
        for p in (PACKAGE / "model").rglob("*.py")
        if model_layer(module_name(p)) is None and p != PACKAGE / "model" / "__init__.py"
    ]
    assert loose == []


def test_the_checkers_see_a_circle_and_a_backward_layer(tmp_path, monkeypatch):
    """Both rules can fail: a function-level import closing a circle, and the inputs importing the
    decision, are reported."""
    fake = tmp_path / "verifyprof"
    for layer in ("inputs", "decision"):
        (fake / "model" / layer).mkdir(parents=True)
    (fake / "model" / "inputs" / "a.py").write_text(
        "def f():\n    from verifyprof.model.decision.b import g\n"
    )
    (fake / "model" / "decision" / "b.py").write_text("from verifyprof.model.inputs.a import f\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    assert import_cycles() == ["verifyprof.model.decision.b <-> verifyprof.model.inputs.a"]
    assert backward_model_imports() == [
        "verifyprof.model.inputs.a (inputs) imports verifyprof.model.decision.b (decision)"
    ]
