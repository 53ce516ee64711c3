"""Golden outputs: the reference breakdown / whatif JSON of every bundled trace and a
representative set of the public ones, so that any change of numbers shows in a diff.

Regenerate after a deliberate change (and say why in the commit):

    python tests/golden_cases.py --regenerate

Each case is a CLI command line run in-process from the repository root; its JSON output is
stored as ``tests/golden/<name>.json`` and compared field by field by ``tests/test_golden.py``.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden"
PUB = "tests/data/public"

OWN = {
    "dense-eager": (
        "traces/workload-dense-eager/trace.sqlite.gz",
        "traces/workload-dense-eager/manifest.json",
    ),
    "dense-graph": (
        "traces/workload-dense-graph/trace.sqlite.gz",
        "traces/workload-dense-graph/manifest.json",
    ),
    "moe-eager": (
        "traces/workload-moe-eager/trace.sqlite.gz",
        "traces/workload-moe-eager/manifest.json",
    ),
    "moe-graph": (
        "traces/workload-moe-graph/trace.sqlite.gz",
        "traces/workload-moe-graph/manifest.json",
    ),
    "capture-hf-assisted": (
        "traces/capture-hf-assisted/capture.sqlite.gz",
        "traces/capture-hf-assisted/manifest.json",
    ),
    "capture-workload-hooks": (
        "traces/capture-workload-hooks/capture.sqlite.gz",
        "traces/capture-workload-hooks/manifest.json",
    ),
    "dense-pipelined-eager": ("traces/workload-dense-pipelined-eager/trace.sqlite.gz", None),
    "dense-pipelined-graph": ("traces/workload-dense-pipelined-graph/trace.sqlite.gz", None),
    "dense-compile": (
        "traces/workload-dense-compile/trace.sqlite.gz",
        "traces/workload-dense-compile/manifest.json",
    ),
}

CASES: dict[str, list[str]] = {}
for _name, (_trace, _manifest) in OWN.items():
    CASES[f"breakdown-{_name}"] = ["breakdown", _trace, "--json"]
    CASES[f"whatif-{_name}"] = [
        "whatif",
        "--from",
        _trace,
        *(["--manifest", _manifest] if _manifest else ["--accept-len", "2.0"]),
        "--json",
    ]
for _file in (
    "nsys/flameox_cudagraph_rtx3060_nsys2025.5.sqlite",
    "nsys/nsysai_mfu_2gpu_before_nsys2026.2.sqlite.gz",
    "nsys/nsysai_mock_rtx3080_nsys2026.1.sqlite",
    "nsys/pipit_saxpy_mpi_a100_nsys2022.2.sqlite.gz",
    "kineto/hta_nccl_data_a100_rank0of2.json.gz",
    "kineto/tracelens_b200_vllm_moe_eager_trace.json.gz",
    "kineto/tracelens_mi300x_sglang_qwen3-8b_decode.json.gz",
):
    _stem = Path(_file).name.split(".")[0]
    CASES[f"breakdown-whole-{_stem}"] = ["breakdown", f"{PUB}/{_file}", "--whole-trace", "--json"]
CASES["breakdown-mi300x-decode-steps"] = [
    "breakdown",
    f"{PUB}/kineto/tracelens_mi300x_sglang_qwen3-8b_decode.json.gz",
    "--range",
    r"step\[",
    "--json",
]
CASES["whatif-whole-b200"] = [
    "whatif",
    "--from",
    f"{PUB}/kineto/tracelens_b200_vllm_moe_eager_trace.json.gz",
    "--whole-trace",
    "--accept-len",
    "2.0",
    "--json",
]
CASES["whatif-whole-mi300x"] = [
    "whatif",
    "--from",
    f"{PUB}/kineto/tracelens_mi300x_sglang_qwen3-8b_decode.json.gz",
    "--whole-trace",
    "--accept-len",
    "2.0",
    "--json",
]
CASES["whatif-plain"] = [
    "whatif",
    "--verify-ms",
    "15",
    "--accept-len",
    "2.0",
    "--baseline-tps",
    "82",
    "--json",
]


def run_case(argv: list[str]) -> Any:
    """The case's JSON output, run in-process from the repository root."""
    from typer.testing import CliRunner

    from verifyprof.cli import app

    here = os.getcwd()
    os.chdir(REPO)
    try:
        result = CliRunner().invoke(app, argv, catch_exceptions=False)
    finally:
        os.chdir(here)
    if result.exit_code != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {result.exit_code}: {result.output[-2000:]}")
    return json.loads(result.stdout)


def differences(expected: Any, actual: Any, where: str = "$", rel: float = 1e-9) -> list[str]:
    """Field-by-field differences; floats equal within ``rel`` (summation order may change)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = [f"{where}.{k}: missing" for k in expected if k not in actual]
        out += [f"{where}.{k}: unexpected" for k in actual if k not in expected]
        for key in expected.keys() & actual.keys():
            out += differences(expected[key], actual[key], f"{where}.{key}", rel)
        return out
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{where}: length {len(expected)} -> {len(actual)}"]
        return [
            d
            for i, (e, a) in enumerate(zip(expected, actual))
            for d in differences(e, a, f"{where}[{i}]", rel)
        ]
    if isinstance(expected, float) and isinstance(actual, float):
        if math.isclose(expected, actual, rel_tol=rel, abs_tol=1e-12):
            return []
    elif expected == actual and type(expected) is type(actual):
        return []
    return [f"{where}: {expected!r} -> {actual!r}"]


def regenerate(names: list[str] | None = None) -> None:
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name, argv in CASES.items():
        if names and name not in names:
            continue
        data = run_case(argv)
        (GOLDEN / f"{name}.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"wrote tests/golden/{name}.json")


if __name__ == "__main__":
    if "--regenerate" not in sys.argv[1:]:
        sys.exit("usage: python tests/golden_cases.py --regenerate [CASE ...]")
    sys.path.insert(0, str(REPO))
    regenerate([a for a in sys.argv[1:] if a != "--regenerate"])
