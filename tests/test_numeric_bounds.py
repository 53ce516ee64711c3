"""Every number verifyprof takes in is finite and within its documented range (issue 22): options
(``--accept-len``, times, rates, ``--gate``), the capture manifest's fields and what a program
reports in ``results.json``. A number out of range is one line naming the option or field, exit 2,
before any work; none ever turns into ``inf tok/s``, a gate that cannot fail, or NaN in a manifest.

Real CLI runs on the bundled traces' breakdown JSON and manifests (copies in a temp folder)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from capture_helpers import assert_nothing_left, new_tag, run_capture
from cli_helpers import verifyprof
from clirun import digest
from conftest import OWN_TRACES, REPO

from verifyprof.capture import driver

GOLDEN = REPO / "tests" / "golden"
GRAPH_JSON = GOLDEN / "breakdown-dense-graph.json"  # the same workload, CUDA graphs: 2.2 ms verify
EAGER_JSON = GOLDEN / "breakdown-dense-eager.json"  # eager: 12.6 ms verify (slower by ~470%)
HF = OWN_TRACES / "capture-hf-assisted"
KINETO = REPO / "tests/data/public/kineto/tracelens_mi300x_sglang_qwen3-8b_decode.json.gz"


def refused(done, line: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout[-500:], done.stderr[-2000:])
    assert done.stderr.strip().splitlines() == [f"verifyprof: error: {line}"], done.stderr
    assert done.stdout == ""  # nothing printed: no "inf tok/s", no JSON with null or NaN


def strict_json(text: str) -> object:
    """JSON as the standard reads it: NaN and Infinity are not JSON."""

    def no_constant(name: str) -> None:
        raise AssertionError(f"{name} in JSON output")

    return json.loads(text, parse_constant=no_constant)


# --- options -------------------------------------------------------------------------------------

ACCEPT_RANGE = "(it counts the bonus token: 1 to 257 tokens per verify step)"


@pytest.mark.parametrize("as_json", [[], ["--json"]])
def test_an_accept_length_that_would_make_tokens_per_s_infinite_is_refused(as_json):
    done = verifyprof("whatif", "--verify-ms", "15", "--accept-len", "1e308", *as_json)
    refused(done, f"--accept-len must be <= 257 {ACCEPT_RANGE}, got 1e+308")


def test_a_verify_time_below_a_nanosecond_is_refused():
    done = verifyprof("whatif", "--verify-ms", "1e-320", "--accept-len", "2")
    refused(done, "--verify-ms must be >= 1e-06 ms (1 ns to 1 hour), got 9.99989e-321")


@pytest.mark.parametrize(
    "option, value, problem",
    [
        ("--baseline-tps", "nan", "must be a finite number, got nan"),
        ("--decode-ms", "inf", "must be a finite number, got inf"),
        ("--draft-ms", "1e300", "must be <= 3.6e+06 ms (at most 1 hour), got 1e+300"),
        ("--overhead-ms", "1e300", "must be <= 3.6e+06 ms (at most 1 hour), got 1e+300"),
        ("--draft-cost-ratio", "1e300", "must be <= 100, got 1e+300"),
    ],
)
def test_a_number_out_of_its_range_is_refused_naming_its_option(option, value, problem):
    args = {"--verify-ms": "15", "--alpha": "0.6", "--num-draft": "3", option: value}
    done = verifyprof("whatif", *[str(x) for pair in args.items() for x in pair])
    refused(done, f"{option} {problem}")


def test_a_baseline_rate_too_small_to_give_a_finite_decode_time_is_refused():
    done = verifyprof(
        "whatif", "--verify-ms", "15", "--accept-len", "2", "--baseline-tps", "1e-300"
    )
    refused(done, "--baseline-tps must be >= 0.001 tok/s, got 1e-300")


@pytest.mark.parametrize("gate", ["nan", "inf", "-inf"])
def test_a_gate_that_could_never_fail_is_refused(gate):
    done = verifyprof("compare", str(GRAPH_JSON), str(EAGER_JSON), "--gate", gate)
    refused(done, f"--gate must be a finite number, got {float(gate)!r}")


def test_a_finite_gate_fails_when_verify_got_slower():
    done = verifyprof("compare", str(GRAPH_JSON), str(EAGER_JSON), "--gate", "10", "--json")
    assert done.returncode == 1, done.stderr
    assert strict_json(done.stdout)["gate"] == {"pct": 10.0, "failed": True}


def test_compare_refuses_a_negative_accept_length():
    done = verifyprof("compare", str(GRAPH_JSON), str(EAGER_JSON), "--accept-len", "-1")
    refused(done, f"--accept-len must be >= 1 {ACCEPT_RANGE}, got -1")


def test_report_refuses_a_negative_accept_length_and_writes_nothing(tmp_path):
    out = tmp_path / "report.html"
    done = verifyprof("report", str(EAGER_JSON), "--accept-len", "-1", "-o", str(out))
    refused(done, f"--accept-len must be >= 1 {ACCEPT_RANGE}, got -1")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("option", ["--baseline-tps", "--decode-ms"])
def test_report_refuses_a_plain_decoding_rate_that_is_not_positive(option, tmp_path):
    out = tmp_path / "report.html"
    done = verifyprof("report", str(EAGER_JSON), option, "-3", "-o", str(out))
    refused(done, f"{option} must be positive, got -3")
    assert list(tmp_path.iterdir()) == []


def test_breakdown_refuses_an_accept_length_out_of_range_before_reading_the_trace(tmp_path):
    csv = tmp_path / "steps.csv"
    done = verifyprof(
        "breakdown", str(KINETO), "--whole-trace", "--accept-len", "1e308", "--csv", str(csv)
    )
    refused(done, f"--accept-len must be <= 257 {ACCEPT_RANGE}, got 1e+308")
    assert not csv.exists()


# --- the capture manifest's fields ---------------------------------------------------------------


def manifest_with(tmp_path: Path, **results: object) -> Path:
    """traces/capture-hf-assisted/manifest.json with some results replaced (NaN written as the
    Python json module writes it: ``NaN``, which is not JSON)."""
    doc = json.loads((HF / "manifest.json").read_text())
    doc["results"].update(results)
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    "field, value, problem",
    [
        ("accept_len", math.nan, "must be a finite number, got nan"),
        ("accept_len", 1e300, f"must be <= 257 {ACCEPT_RANGE}, got 1e+300"),
        ("tokens_per_s", -25.4, "must not be negative, got -25.4"),
        ("baseline_tokens_per_s", math.inf, "must be a finite number, got inf"),
    ],
)
def test_a_manifest_field_out_of_range_is_refused_naming_it(tmp_path, field, value, problem):
    manifest = manifest_with(tmp_path, **{field: value})
    kept = digest(manifest)
    done = verifyprof("whatif", "--from", str(HF / "breakdown.json"), "--manifest", str(manifest))
    refused(done, f"{manifest}: manifest field {field!r} {problem}")
    assert digest(manifest) == kept


def test_a_nan_dilation_factor_in_a_manifest_is_refused(tmp_path):
    doc = json.loads((HF / "manifest.json").read_text())
    doc["dilation"] = {"factor": math.nan, "unprofiled_tokens_per_s": 30.0, "source": "x"}
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(doc))
    done = verifyprof("whatif", "--from", str(HF / "breakdown.json"), "--manifest", str(manifest))
    refused(done, f"{manifest}: manifest field 'dilation.factor' must be a finite number, got nan")


# --- what a program reports ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "results, problem",
    [
        (
            "{'accept_len': float('nan'), 'tokens_per_s': 91.5}",
            "'accept_len' must be a finite number, got nan",
        ),
        (
            "{'accept_len': 2.25, 'tokens_per_s': -3.0}",
            "'tokens_per_s' must not be negative, got -3",
        ),
        (
            "{'accept_len': 2.25, 'loss': float('inf')}",
            "'loss' is inf, not a finite number (NaN is not JSON)",
        ),
    ],
)
def test_a_programs_results_out_of_range_never_reach_the_manifest(tmp_path, results, problem):
    out = tmp_path / "cap"
    script = (
        "import json, os, pathlib; pathlib.Path(os.environ['VERIFYPROF_CAPTURE_DIR'],"
        f" 'results.json').write_text(json.dumps({results}))"
    )
    tag = new_tag()
    proc = run_capture(["--backend", "none", "--out", str(out), "--", "python", "-c", script], tag)
    assert proc.returncode == 1, proc.stderr  # the run failed: what it captured is kept
    errors = [line for line in proc.stderr.splitlines() if line.startswith("verifyprof: error:")]
    assert errors == [
        f"verifyprof: error: {out / 'results.json'}: field {problem} (outputs kept in {out})"
    ]
    doc = strict_json((out / "manifest.json").read_text())  # valid JSON: no NaN, no Infinity
    assert doc["status"] == "failed" and doc["results"] is None
    assert doc["error"] == f"{out / 'results.json'}: field {problem}"
    assert_nothing_left(tag)


def test_a_server_reply_with_a_nan_speculation_count_is_not_recorded():
    reply = (
        b'{"meta_info": {"completion_tokens": 8, "spec_verify_ct": NaN, "spec_accept_rate": 0.5}}'
    )
    result = driver.parse_generate_reply(0, 0, 0.1, 200, reply)
    assert result.ok and result.spec == {"spec_accept_rate": 0.5}
    assert driver.summarize([result])["accept_len"] is None  # no verify count: not a NaN length


def test_every_numeric_option_has_a_documented_range():
    """The README lists the ranges of contracts/bounds.py; a new bounded option is documented."""
    from verifyprof.contracts.bounds import OPTIONS

    readme = (REPO / "README.md").read_text()
    assert [option for option in OPTIONS if f"`{option}`" not in readme] == []
