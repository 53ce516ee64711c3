"""No NaN or infinity ever reaches an output (issue 22). Inputs are bounded so none should arise;
if one does (a bug), the JSON writers refuse it in one line naming where it is, before a byte is
written: orjson would print it as ``null`` (a silent hole), the stdlib as ``NaN`` (not JSON)."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from conftest import PUBLIC

from verifyprof import pipeline
from verifyprof.contracts.bounds import NonFiniteOutput
from verifyprof.contracts.plumbing import outputs
from verifyprof.report import files

KINETO = PUBLIC / "kineto" / "tracelens_mi300x_sglang_qwen3-8b_decode.json.gz"  # 36 KB


def test_print_json_refuses_a_nan_and_prints_nothing(capfd):
    with pytest.raises(NonFiniteOutput) as err:
        files.print_json({"schema": "verifyprof.whatif/1", "current": {"tokens_per_s": math.inf}})
    assert str(err.value) == (
        "internal error: the JSON output would hold inf at current.tokens_per_s, which is not a"
        " finite number; nothing was written (please report this with the command line)"
    )
    assert capfd.readouterr().out == ""


def test_a_nan_inside_a_numpy_array_is_refused_too():
    with pytest.raises(NonFiniteOutput, match=r"nan at rows\[1\].share\[2\]"):
        files.dumps({"rows": [{"share": [0.5]}, {"share": np.array([0.1, 0.2, np.nan], "f4")}]})


def test_write_json_refuses_a_nan_and_keeps_the_file_it_would_replace(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text('{"status": "ok"}\n')
    with pytest.raises(NonFiniteOutput, match="would hold nan at results.accept_len"):
        outputs.write_json(path, {"status": "ok", "results": {"accept_len": math.nan}})
    assert path.read_text() == '{"status": "ok"}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]  # no temp file left


def test_the_breakdown_json_stream_refuses_a_nan_before_its_first_byte(monkeypatch):
    result = pipeline.breakdown(KINETO, whole_trace=True)
    summary = result.summary()
    summary["groups"][0]["phases"]["attention"]["share"] = math.nan
    monkeypatch.setattr(result, "summary", lambda: summary)
    stream = io.BytesIO()
    with pytest.raises(NonFiniteOutput, match=r"nan at summary.groups\[0\].phases.attention.share"):
        files.stream_breakdown_json(result, stream)
    assert stream.getvalue() == b""
