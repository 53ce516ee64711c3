"""The command line: parse, call one stage, print. No analysis lives here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from verifyprof.cli.args import (
    _check_manifest,
    _Group,
    _nsys_hint,
    _parallel,
    _ranking,
    _step_regex,
    _wrote,
)
from verifyprof.contracts import ranges
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.ranges import DEFAULT_STEP_REGEX

KERNELS_SCHEMA = "verifyprof.kernels/1"
WHATIF_SCHEMA = "verifyprof.whatif/1"


app = typer.Typer(
    cls=_Group,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help=(
        "What is inside the speculative-decoding verify step, and which fix is worth the most"
        " tokens/s."
    ),
)

TraceArg = Annotated[
    str,
    typer.Argument(
        help=(
            "nsys .nsys-rep / .sqlite(.gz), PyTorch-profiler JSON(.gz), a directory (capture folder"
            " or per-rank files) or a glob"
        ),
        metavar="TRACE",
    ),
]
RangeOpt = Annotated[
    Optional[str],
    typer.Option(
        "--range",
        help=(
            "regex (Python re.search on each range's text) selecting the step ranges; default:"
            " verifyprof's ranges and SGLang's TARGET_VERIFY"
        ),
        show_default=False,
    ),
]
StepOpt = Annotated[
    Optional[str],
    typer.Option(
        "--step",
        help=(
            "steps of one phase, from verifyprof ranges, SGLang spans and user ranges alike:"
            f" {'|'.join(ranges.PHASES)}"
        ),
        metavar="PHASE",
    ),
]
QuietOpt = Annotated[
    bool, typer.Option("--quiet", help="no progress line on the terminal while reading")
]
TaxonomyOpt = Annotated[
    Optional[Path],
    typer.Option("--taxonomy", help="kernel-name rules (TOML) replacing the built-in ones"),
]
JsonOpt = Annotated[
    bool,
    typer.Option("--json", help="print machine-readable JSON instead of tables (a flag: no value)"),
]


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        print(f"verifyprof {version('verifyprof')}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="print the version and exit", callback=_version, is_eager=True
        ),
    ] = False,
) -> None:
    """What is inside the speculative-decoding verify step, and which fix is worth the most
    tokens/s."""


TracesArg = Annotated[
    list[str],
    typer.Argument(
        help=(
            "trace file(s), directories or globs; several files (one per rank, stage or node) are"
            " broken down in parallel and reduced to one multi-rank result"
        )
    ),
]
WorkersOpt = Annotated[
    Optional[int],
    typer.Option(
        "--workers",
        min=1,
        help=(
            "local worker processes for several files, or for the processes of one large nsys"
            " export (default: one per file or process, at most one per CPU; 1: read in this"
            " process)"
        ),
    ),
]
SchedulerOpt = Annotated[
    Optional[str],
    typer.Option(
        "--scheduler",
        help=(
            "run the per-file map on a Dask cluster: tcp://HOST:PORT, or 'dask' for a local cluster"
            " (needs verifyprof[dist])"
        ),
    ),
]
StrictOpt = Annotated[
    bool, typer.Option("--strict", help="a file that fails is an error (exit 2), not a warning")
]


@app.command()
def breakdown(
    traces: TracesArg,
    step_range: RangeOpt = None,
    step: StepOpt = None,
    taxonomy: TaxonomyOpt = None,
    whole_trace: Annotated[
        bool, typer.Option("--whole-trace", help="one step per device spanning the whole trace")
    ] = False,
    show_all: Annotated[
        bool,
        typer.Option(
            "--all",
            help=(
                "a phase table for every step group (default: the verify step's, the rest folded"
                " into one table)"
            ),
        ),
    ] = False,
    as_json: JsonOpt = False,
    csv: Annotated[Optional[Path], typer.Option("--csv", help="write per-step rows as CSV")] = None,
    parquet: Annotated[
        Optional[Path], typer.Option("--parquet", help="write per-step rows as Parquet")
    ] = None,
    accept_len: Annotated[
        Optional[float],
        typer.Option("--accept-len", help="accept length: the verdict adds the plan's first fix"),
    ] = None,
    manifest: Annotated[
        Optional[Path],
        typer.Option("--manifest", help="capture manifest.json (accept length) for the verdict"),
    ] = None,
    workers: WorkersOpt = None,
    scheduler: SchedulerOpt = None,
    strict: StrictOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Per verify step and per GPU: where the time went (phases sum to the step's wall time)."""
    from verifyprof import pipeline
    from verifyprof.contracts import outputs
    from verifyprof.report import console, files, integrity, progress
    from verifyprof.trace.sources import expand

    regex = _step_regex(step_range, step)
    outputs.protect(
        [p for spec in traces for p in expand(spec)], outputs=(csv, parquet)
    )  # never write onto a trace read
    with (
        _nsys_hint(traces[0]),
        progress.status(f"breaking down {', '.join(traces)[:60]}", quiet) as shown,
    ):
        result = pipeline.breakdown(
            traces,
            step_regex=regex,
            taxonomy=taxonomy,
            whole_trace=whole_trace,
            release=True,
            parallel=_parallel(workers, scheduler, strict, shown),
        )
    if csv is not None:
        files.write_steps_csv(result, csv)
        _wrote(csv)
    if parquet is not None:
        files.write_steps_parquet(result, parquet)
        _wrote(parquet)
    if as_json:
        files.print_breakdown_json(result)
        integrity.warn_integrity(result.integrity_records(), ", ".join(traces))
    else:
        console.print_breakdown(result, show_all=show_all)
        folder_manifest = (
            Path(traces[0]) / "manifest.json" if len(traces) == 1 else None
        )  # a capture folder's, as whatif reads it
        if (
            manifest is None
            and accept_len is None
            and folder_manifest is not None
            and folder_manifest.is_file()
        ):
            manifest = folder_manifest
        console.print_verdict(pipeline.verdict(result, accept_len=accept_len, manifest=manifest))


@app.command()
def kernels(
    trace: TraceArg,
    top: Annotated[int, typer.Option("--top", help="how many kernels to list (>= 1)", min=1)] = 30,
    taxonomy: TaxonomyOpt = None,
    step_range: Annotated[
        Optional[str],
        typer.Option(
            "--range", help="only kernels inside ranges matching this regex (Python re.search)"
        ),
    ] = None,
    step: StepOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Top kernels with their phase and share of GPU time: check and fix the taxonomy rules."""
    from verifyprof import pipeline
    from verifyprof.report import console, files, integrity, progress

    with _nsys_hint(trace), progress.status(f"reading {trace[:60]}", quiet):
        table = pipeline.kernels(
            trace, taxonomy=taxonomy, step_regex=_step_regex(step_range, step, default=None)
        )
    data = {"schema": KERNELS_SCHEMA, "unit": "ns", **table.to_json(top)}
    if as_json:
        files.print_json(data)
        integrity.warn_integrity(data.get("integrity", []), trace)
    else:
        console.print_kernels(data)


# --- whatif (model stage) and capture (capture stage) register their commands below. ---


@app.command(context_settings={"allow_interspersed_args": False})
def capture(
    program: Annotated[
        Optional[list[str]],
        typer.Argument(
            help="an offline program to run instead of a server: -- python script.py ...",
            show_default=False,
        ),
    ] = None,
    server_cmd: Annotated[
        Optional[str],
        typer.Option(
            "--server-cmd",
            help='server command line, e.g. "python -m sglang.launch_server --model-path ..."',
        ),
    ] = None,
    port: Annotated[
        Optional[int],
        typer.Option("--port", help="server port (default: --port of --server-cmd, else 30000)"),
    ] = None,
    out: Annotated[
        Optional[Path],
        typer.Option("--out", help="new output directory (default: verifyprof-capture-<time>)"),
    ] = None,
    backend: Annotated[
        str,
        typer.Option(
            "--backend",
            help="nsys, torch (SGLang's own torch-profiler traces; server only) or none",
        ),
    ] = "nsys",
    requests: Annotated[int, typer.Option("--requests", help="measured requests")] = 16,
    concurrency: Annotated[
        int, typer.Option("--concurrency", help="requests in flight at once")
    ] = 1,
    input_len: Annotated[
        Optional[int],
        typer.Option(
            "--input-len", help="approximate prompt tokens (built-in prompts grown or cut)"
        ),
    ] = None,
    output_len: Annotated[
        int, typer.Option("--output-len", help="tokens generated per request (EOS ignored)")
    ] = 256,
    prompts: Annotated[
        Optional[Path],
        typer.Option(
            "--prompts", help='JSONL prompts: {"prompt": ..., "max_new_tokens": ...} per line'
        ),
    ] = None,
    warmup: Annotated[int, typer.Option("--warmup", help="requests before the capture starts")] = 2,
    temperature: Annotated[
        float, typer.Option("--temperature", help="sampling temperature (0: greedy)")
    ] = 0.0,
    health_timeout: Annotated[
        float, typer.Option("--health-timeout", help="seconds to wait for /health")
    ] = 600.0,
    hooks: Annotated[
        Optional[str],
        typer.Option(
            "--hooks",
            help="hook presets, comma-separated (default: sglang for a server, none for a program)",
        ),
    ] = None,
    hook: Annotated[
        Optional[list[str]],
        typer.Option("--hook", help="extra hook module:qualname=phase (repeatable)"),
    ] = None,
    num_steps: Annotated[
        Optional[int],
        typer.Option("--num-steps", help="profile only this many forward steps (SGLang num_steps)"),
    ] = None,
    osrt: Annotated[bool, typer.Option("--osrt", help="nsys: also trace OS runtime calls")] = False,
    capture_all: Annotated[
        bool,
        typer.Option(
            "--capture-all", help="program: profile all of it, not just cudaProfilerStart..Stop"
        ),
    ] = False,
    gzip: Annotated[
        bool, typer.Option("--gzip", help="nsys: gzip the SQLite export (capture.sqlite.gz)")
    ] = False,
    stop_timeout: Annotated[
        float,
        typer.Option("--stop-timeout", help="seconds after SIGINT before SIGTERM (then SIGKILL)"),
    ] = 60.0,
    allow_missing_hooks: Annotated[
        bool,
        typer.Option(
            "--allow-missing-hooks",
            help="exit 0 even if no hook fired and no verifyprof range was recorded",
        ),
    ] = False,
    baseline_run: Annotated[
        bool,
        typer.Option(
            "--baseline-run",
            help=(
                "program: run it once unprofiled first (no nsys, no hooks) to measure the"
                " profiler's dilation"
            ),
        ),
    ] = False,
    unprofiled_requests: Annotated[
        Optional[int],
        typer.Option(
            "--unprofiled-requests",
            help=(
                "server: requests after the profile window, for the dilation (default: max(4,"
                " concurrency), at most --requests; 0: none)"
            ),
        ),
    ] = None,
    decode_cmd: Annotated[
        Optional[str],
        typer.Option(
            "--decode-cmd",
            help=(
                "program: the same program with speculation off (a command line), run unprofiled"
                " after the capture: its tokens_per_s is the plain-decoding baseline"
            ),
        ),
    ] = None,
    accept_len_convention: Annotated[
        Optional[str],
        typer.Option(
            "--accept-len-convention",
            help=(
                "program: its accept_len counts tokens_per_verify (bonus included) or"
                " accepted_drafts (converted +1)"
            ),
        ),
    ] = None,
) -> None:
    """Run a server (or program) under nsys with verifyprof's NVTX hooks, drive a workload, and
    write the trace plus manifest.json (accept length, tok/s, versions) for breakdown/whatif."""
    import time as _time

    from verifyprof.capture.options import CaptureOptions
    from verifyprof.capture.results import summary_lines
    from verifyprof.capture.run import capture as run_capture

    options = CaptureOptions(
        out=out or Path(f"verifyprof-capture-{_time.strftime('%Y%m%d-%H%M%S')}"),
        server_cmd=server_cmd,
        program=list(program or []),
        backend=backend,
        port=port,
        requests=requests,
        concurrency=concurrency,
        input_len=input_len,
        output_len=output_len,
        prompts=prompts,
        warmup=warmup,
        temperature=temperature,
        health_timeout=health_timeout,
        hooks=None if hooks is None else [h.strip() for h in hooks.split(",")],
        hook_targets=list(hook or []),
        num_steps=num_steps,
        osrt=osrt,
        capture_all=capture_all,
        gzip=gzip,
        stop_timeout=stop_timeout,
        allow_missing_hooks=allow_missing_hooks,
        baseline_run=baseline_run,
        unprofiled_requests=unprofiled_requests,
        accept_len_convention=accept_len_convention,
        decode_cmd=decode_cmd,
        argv=list(sys.argv),
    )
    for line in summary_lines(run_capture(options)):
        print(" ".join(line.split()) if "\n" in line else line)


@app.command()
def whatif(
    verify_ms: Annotated[
        Optional[float], typer.Option("--verify-ms", help="verify step time (ms)")
    ] = None,
    accept_len: Annotated[
        Optional[float],
        typer.Option("--accept-len", help="mean accepted tokens per cycle, bonus included"),
    ] = None,
    alpha: Annotated[
        Optional[float],
        typer.Option("--alpha", help="i.i.d. acceptance rate (Leviathan Eq. 1), with --num-draft"),
    ] = None,
    num_draft: Annotated[
        Optional[int], typer.Option("--num-draft", help="draft tokens per cycle (K)")
    ] = None,
    survival: Annotated[
        Optional[str], typer.Option("--survival", help="s1,s2,...: P(first i drafts all accepted)")
    ] = None,
    draft_cost_ratio: Annotated[
        Optional[float],
        typer.Option(
            "--draft-cost-ratio", help="c = draft step / target step (Thm 3.8, optimal K)"
        ),
    ] = None,
    draft_ms: Annotated[
        Optional[float], typer.Option("--draft-ms", help="draft time per cycle (ms)")
    ] = None,
    overhead_ms: Annotated[
        Optional[float], typer.Option("--overhead-ms", help="other time per cycle (ms)")
    ] = None,
    batch: Annotated[
        Optional[int], typer.Option("--batch", help="requests per step (throughput for the batch)")
    ] = None,
    baseline_tps: Annotated[
        Optional[float], typer.Option("--baseline-tps", help="plain decode tokens/s per request")
    ] = None,
    decode_ms: Annotated[
        Optional[float], typer.Option("--decode-ms", help="plain decode step time (ms)")
    ] = None,
    source: Annotated[
        Optional[str],
        typer.Option(
            "--from",
            help=(
                "breakdown JSON (verifyprof breakdown --json), a trace, or several trace files"
                " (directory or quoted glob)"
            ),
        ),
    ] = None,
    manifest: Annotated[
        Optional[Path],
        typer.Option("--manifest", help="capture manifest.json (accept length, baseline)"),
    ] = None,
    step: Annotated[
        Optional[str],
        typer.Option(
            "--step",
            help=(
                f"the steps to model: a phase ({'|'.join(ranges.PHASES)}: verifyprof, SGLang and"
                " user ranges alike) or a step name (default: the verify steps)"
            ),
        ),
    ] = None,
    step_range: RangeOpt = None,
    whole_trace: Annotated[
        bool,
        typer.Option(
            "--whole-trace", help="model the whole trace as one step (a trace given to --from)"
        ),
    ] = False,
    width: Annotated[
        Optional[int],
        typer.Option(
            "--width",
            help=(
                "verify tokens per request: which width to model, or the width when the trace does"
                " not say"
            ),
        ),
    ] = None,
    mode: Annotated[
        Optional[str], typer.Option("--mode", help="eager or graph, when the trace has both")
    ] = None,
    hardware: Annotated[
        Optional[str],
        typer.Option(
            "--hardware", help="hardware name (h200, h100, rtx-pro-6000, ...) or TOML file"
        ),
    ] = None,
    link: Annotated[
        Optional[str],
        typer.Option(
            "--link", help="override the GPU link: pcie_gen4, pcie_gen5, nvlink4, nvlink5"
        ),
    ] = None,
    model: Annotated[
        Optional[str],
        typer.Option(
            "--model", help="model config name (kimi-k2, deepseek-v3, workload) or TOML file"
        ),
    ] = None,
    tp: Annotated[Optional[int], typer.Option("--tp", help="tensor-parallel size")] = None,
    context: Annotated[
        Optional[float],
        typer.Option("--context", help="context length (tokens) for the attention floor"),
    ] = None,
    drafter_gain: Annotated[
        Optional[float],
        typer.Option(
            "--drafter-gain",
            help="accept-length gain assumed by better_drafter (default: published drafter data)",
        ),
    ] = None,
    assume_capturable: Annotated[
        bool,
        typer.Option(
            "--assume-capturable",
            help=(
                "rank graph and compile fixes as if the steps' host syncs and shape changes were"
                " gone (they are otherwise listed after the rest, with what must change)"
            ),
        ),
    ] = False,
    candidate: Annotated[
        Optional[list[str]], typer.Option("--candidate", help="only these candidates (repeatable)")
    ] = None,
    as_json: JsonOpt = False,
    workers: WorkersOpt = None,
    scheduler: SchedulerOpt = None,
    strict: StrictOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Throughput model: tokens/s from verify time and accept length, or candidates ranked from a
    breakdown."""
    from verifyprof import pipeline
    from verifyprof.model.whatif import WhatifOptions
    from verifyprof.report import files, progress
    from verifyprof.report import whatif as show

    if source is not None and verify_ms is not None:
        raise VerifyprofError(
            "--verify-ms is for the plain model; with --from the verify time is measured from the"
            " trace (choose it with --step, --width, --mode)"
        )
    notes: list[str] = []
    if manifest is None and source is not None and (Path(source) / "manifest.json").is_file():
        manifest = Path(source) / "manifest.json"
        notes.append(
            f"manifest {manifest} found in the capture folder given to --from (accept length,"
            " baseline)"
        )
    if manifest is not None:
        _check_manifest(manifest)
    phase = step if step in ranges.PHASES else None
    options = WhatifOptions(
        verify_ms=verify_ms,
        accept_len=accept_len,
        alpha=alpha,
        num_draft=num_draft,
        survival=survival,
        draft_cost_ratio=draft_cost_ratio,
        draft_ms=draft_ms,
        overhead_ms=overhead_ms,
        batch=batch,
        baseline_tps=baseline_tps,
        decode_ms=decode_ms,
        source=source,
        manifest=manifest,
        step=None if phase else step,
        step_range=_step_regex(step_range, None),
        whole_trace=whole_trace,
        width=width,
        mode=mode,
        hardware=hardware,
        link=link,
        model=model,
        tp=tp,
        context=context,
        drafter_gain=drafter_gain,
        candidates=candidate or [],
        assume_capturable=assume_capturable,
    )
    if source is None:
        result = {"schema": WHATIF_SCHEMA, "unit": "ms", **pipeline.whatif_plain(options)}
        files.print_json(result) if as_json else show.print_plain(result)
        return
    with progress.status(f"breaking down {source[:60]} and ranking fixes", quiet) as shown:
        ranking = {
            "schema": WHATIF_SCHEMA,
            "unit": "ms",
            **_ranking(options, phase, notes, _parallel(workers, scheduler, strict, shown)),
        }
    ranking["current"].setdefault("notes", []).extend(notes)
    files.print_json(ranking) if as_json else show.print_ranking(ranking)


@app.command()
def hooks(
    spec: Annotated[
        str,
        typer.Argument(
            help=(
                "presets and targets: sglang, hf-assisted, workload, module:qualname=phase"
                " (comma-separated)"
            )
        ),
    ] = "sglang",
    program: Annotated[
        Optional[list[str]],
        typer.Argument(
            help=(
                "the program to be captured (-- python script.py): its folder is searched as Python"
                " will"
            ),
            show_default=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Which hook targets exist in the installed packages (and the program's own folder, default
    the current one): run before a capture to see what will be wrapped."""
    import os as _os
    import warnings

    from verifyprof.capture.hooks import api as hook_api
    from verifyprof.capture.hooks.search_path import is_main_module, program_folder
    from verifyprof.report import console, files

    folder = program_folder(program) if program else None
    is_main = (lambda module: is_main_module(module, program)) if program else None
    with (
        warnings.catch_warnings()
    ):  # each HookWarning is a row of the report below, not a stderr line with source
        warnings.simplefilter("ignore", hook_api.HookWarning)
        statuses = hook_api.check(
            spec, path=[p for p in (folder, _os.getcwd()) if p is not None], is_main=is_main
        )
    if as_json:
        files.print_json([s.to_json() for s in statuses])
    else:
        console.print_hooks(spec, statuses)
    if any(s.state == "missing" for s in statuses):
        raise typer.Exit(1)


# --- compare and report (issue 13) ---


@app.command()
def compare(
    before: Annotated[str, typer.Argument(help="BEFORE: a trace or a breakdown JSON")],
    after: Annotated[str, typer.Argument(help="AFTER: a trace or a breakdown JSON")],
    accept_len: Annotated[
        Optional[float],
        typer.Option(
            "--accept-len", help="accept length for the prediction check (BEFORE's what-if)"
        ),
    ] = None,
    manifest: Annotated[
        Optional[Path],
        typer.Option(
            "--manifest", help="BEFORE's capture manifest (accept length) for the prediction check"
        ),
    ] = None,
    gate: Annotated[
        Optional[float],
        typer.Option("--gate", help="exit 1 when verify got slower by more than PCT percent"),
    ] = None,
    step_range: RangeOpt = DEFAULT_STEP_REGEX,
    taxonomy: TaxonomyOpt = None,
    whole_trace: Annotated[
        bool,
        typer.Option(
            "--whole-trace",
            help="compare one step per device spanning each whole trace (traces without ranges)",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Before/after: per-phase deltas of the verify step, launches, kernel families, ranks, a
    verdict and a CI gate."""
    from verifyprof import pipeline
    from verifyprof.report import compare as show
    from verifyprof.report import files

    result = pipeline.compare(
        before,
        after,
        accept_len=accept_len,
        manifest=manifest,
        step_regex=step_range,
        taxonomy=taxonomy,
        whole_trace=whole_trace,
    )
    data = result.to_json(gate=gate)
    files.print_json(data) if as_json else show.print_compare(data)
    if gate is not None and result.gate_failed(gate):
        raise typer.Exit(1)


@app.command()
def report(
    source: Annotated[str, typer.Argument(help="a trace or a breakdown JSON")],
    out: Annotated[
        Path, typer.Option("-o", "--out", help="the HTML file to write (e.g. reports/NAME.html)")
    ],
    compare_with: Annotated[
        Optional[str],
        typer.Option("--compare", help="AFTER: a trace or breakdown JSON to compare SOURCE with"),
    ] = None,
    accept_len: Annotated[
        Optional[float],
        typer.Option("--accept-len", help="accept length for the what-if plan and the heatmap"),
    ] = None,
    manifest: Annotated[
        Optional[Path],
        typer.Option(
            "--manifest", help="capture manifest (accept length, baseline) for the what-if"
        ),
    ] = None,
    step_range: RangeOpt = DEFAULT_STEP_REGEX,
    taxonomy: TaxonomyOpt = None,
    whole_trace: Annotated[
        bool, typer.Option("--whole-trace", help="one step per device spanning the whole trace")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="print nothing but errors")] = False,
) -> None:
    """One self-contained HTML file (plotly.js inside: opens offline): verdict, plan, steps,
    timeline, kernels, heatmap."""
    from verifyprof import pipeline
    from verifyprof.report import html

    html.check_output(
        out,
        [source] + ([compare_with] if compare_with else []) + ([str(manifest)] if manifest else []),
    )
    data = pipeline.report(
        source,
        compare_with=compare_with,
        accept_len=accept_len,
        manifest=manifest,
        step_regex=step_range,
        taxonomy=taxonomy,
        whole_trace=whole_trace,
    )
    size = html.write_report(data, out)
    if not quiet:
        print(f"wrote {out} ({size / 1e6:.1f} MB)")


def main() -> None:
    """The console script: errors are one line (see :class:`_Group`)."""
    try:
        app()
    except KeyboardInterrupt:
        print("verifyprof: interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
