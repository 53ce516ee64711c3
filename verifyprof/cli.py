"""The command line: parse, call one stage, print. No analysis lives here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.ranges import DEFAULT_STEP_REGEX

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="What is inside the speculative-decoding verify step, and which fix is worth the most tokens/s.",
)

TraceArg = Annotated[str, typer.Argument(help="nsys .nsys-rep / .sqlite, or PyTorch-profiler JSON(.gz) file, directory or glob")]
RangeOpt = Annotated[str, typer.Option("--range", help="regex selecting the step ranges")]
TaxonomyOpt = Annotated[Optional[Path], typer.Option("--taxonomy", help="kernel-name rules (TOML) replacing the built-in ones")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print machine-readable JSON instead of tables")]


@app.command()
def breakdown(
    trace: TraceArg,
    step_range: RangeOpt = DEFAULT_STEP_REGEX,
    taxonomy: TaxonomyOpt = None,
    whole_trace: Annotated[bool, typer.Option("--whole-trace", help="one step per device spanning the whole trace")] = False,
    as_json: JsonOpt = False,
    csv: Annotated[Optional[Path], typer.Option("--csv", help="write per-step rows as CSV")] = None,
    parquet: Annotated[Optional[Path], typer.Option("--parquet", help="write per-step rows as Parquet")] = None,
    accept_len: Annotated[Optional[float], typer.Option("--accept-len", help="accept length: the verdict adds the plan's first fix")] = None,
    manifest: Annotated[Optional[Path], typer.Option("--manifest", help="capture manifest.json (accept length) for the verdict")] = None,
) -> None:
    """Per verify step and per GPU: where the time went (phases sum to the step's wall time)."""
    from verifyprof import pipeline
    from verifyprof.contracts import outputs
    from verifyprof.report import console, files
    from verifyprof.trace.sources import expand

    outputs.protect(expand(trace), outputs=(csv, parquet))  # never write onto the trace read
    result = pipeline.breakdown(trace, step_regex=step_range, taxonomy=taxonomy, whole_trace=whole_trace, release=True)
    if csv is not None:
        files.write_steps_csv(result, csv)
    if parquet is not None:
        files.write_steps_parquet(result, parquet)
    if as_json:
        files.print_breakdown_json(result)
    else:
        console.print_breakdown(result)
        console.print_verdict(pipeline.verdict(result, accept_len=accept_len, manifest=manifest))


@app.command()
def kernels(
    trace: TraceArg,
    top: Annotated[int, typer.Option("--top", help="how many kernels to list")] = 30,
    taxonomy: TaxonomyOpt = None,
    step_range: Annotated[Optional[str], typer.Option("--range", help="only kernels inside ranges matching this regex")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Top kernels with their phase and share of GPU time: check and fix the taxonomy rules."""
    from verifyprof import pipeline
    from verifyprof.report import console, files

    table = pipeline.kernels(trace, taxonomy=taxonomy, step_regex=step_range)
    if as_json:
        files.print_json(table.to_json(top))
    else:
        console.print_kernels(table, top)


# --- whatif (model stage) and capture (capture stage) register their commands below. ---


@app.command(context_settings={"allow_interspersed_args": False})
def capture(
    program: Annotated[Optional[list[str]], typer.Argument(help="an offline program to run instead of a server: -- python script.py ...", show_default=False)] = None,
    server_cmd: Annotated[Optional[str], typer.Option("--server-cmd", help="server command line, e.g. \"python -m sglang.launch_server --model-path ...\"")] = None,
    port: Annotated[Optional[int], typer.Option("--port", help="server port (default: --port of --server-cmd, else 30000)")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="new output directory (default: verifyprof-capture-<time>)")] = None,
    backend: Annotated[str, typer.Option("--backend", help="nsys, torch (SGLang's own torch-profiler traces; server only) or none")] = "nsys",
    requests: Annotated[int, typer.Option("--requests", help="measured requests")] = 16,
    concurrency: Annotated[int, typer.Option("--concurrency", help="requests in flight at once")] = 1,
    input_len: Annotated[Optional[int], typer.Option("--input-len", help="approximate prompt tokens (built-in prompts grown or cut)")] = None,
    output_len: Annotated[int, typer.Option("--output-len", help="tokens generated per request (EOS ignored)")] = 256,
    prompts: Annotated[Optional[Path], typer.Option("--prompts", help="JSONL prompts: {\"prompt\": ..., \"max_new_tokens\": ...} per line")] = None,
    warmup: Annotated[int, typer.Option("--warmup", help="requests before the capture starts")] = 2,
    temperature: Annotated[float, typer.Option("--temperature", help="sampling temperature (0: greedy)")] = 0.0,
    health_timeout: Annotated[float, typer.Option("--health-timeout", help="seconds to wait for /health")] = 600.0,
    hooks: Annotated[Optional[str], typer.Option("--hooks", help="hook presets, comma-separated (default: sglang for a server, none for a program)")] = None,
    hook: Annotated[Optional[list[str]], typer.Option("--hook", help="extra hook module:qualname=phase (repeatable)")] = None,
    num_steps: Annotated[Optional[int], typer.Option("--num-steps", help="profile only this many forward steps (SGLang num_steps)")] = None,
    osrt: Annotated[bool, typer.Option("--osrt", help="nsys: also trace OS runtime calls")] = False,
    capture_all: Annotated[bool, typer.Option("--capture-all", help="program: profile all of it, not just cudaProfilerStart..Stop")] = False,
    gzip: Annotated[bool, typer.Option("--gzip", help="nsys: gzip the SQLite export (capture.sqlite.gz)")] = False,
    stop_timeout: Annotated[float, typer.Option("--stop-timeout", help="seconds after SIGINT before SIGTERM (then SIGKILL)")] = 60.0,
    allow_missing_hooks: Annotated[bool, typer.Option("--allow-missing-hooks", help="exit 0 even if no hook fired and no verifyprof range was recorded")] = False,
    baseline_run: Annotated[bool, typer.Option("--baseline-run", help="program: run it once unprofiled first (no nsys, no hooks) to measure the profiler's dilation")] = False,
    unprofiled_requests: Annotated[Optional[int], typer.Option("--unprofiled-requests", help="server: requests after the profile window, for the dilation (default: max(4, concurrency), at most --requests; 0: none)")] = None,
    accept_len_convention: Annotated[Optional[str], typer.Option("--accept-len-convention", help="program: its accept_len counts tokens_per_verify (bonus included) or accepted_drafts (converted +1)")] = None,
) -> None:
    """Run a server (or program) under nsys with verifyprof's NVTX hooks, drive a workload, and
    write the trace plus manifest.json (accept length, tok/s, versions) for breakdown/whatif."""
    import time as _time

    from verifyprof.capture.options import CaptureOptions
    from verifyprof.capture.results import summary_lines
    from verifyprof.capture.run import capture as run_capture

    options = CaptureOptions(
        out=out or Path(f"verifyprof-capture-{_time.strftime('%Y%m%d-%H%M%S')}"),
        server_cmd=server_cmd, program=list(program or []), backend=backend, port=port,
        requests=requests, concurrency=concurrency, input_len=input_len, output_len=output_len,
        prompts=prompts, warmup=warmup, temperature=temperature, health_timeout=health_timeout,
        hooks=None if hooks is None else [h.strip() for h in hooks.split(",")], hook_targets=list(hook or []),
        num_steps=num_steps, osrt=osrt, capture_all=capture_all, gzip=gzip, stop_timeout=stop_timeout,
        allow_missing_hooks=allow_missing_hooks, baseline_run=baseline_run, unprofiled_requests=unprofiled_requests,
        accept_len_convention=accept_len_convention, argv=list(sys.argv),
    )
    for line in summary_lines(run_capture(options)):
        print(line)


@app.command()
def whatif(
    verify_ms: Annotated[Optional[float], typer.Option("--verify-ms", help="verify step time (ms)")] = None,
    accept_len: Annotated[Optional[float], typer.Option("--accept-len", help="mean accepted tokens per cycle, bonus included")] = None,
    alpha: Annotated[Optional[float], typer.Option("--alpha", help="i.i.d. acceptance rate (Leviathan Eq. 1), with --num-draft")] = None,
    num_draft: Annotated[Optional[int], typer.Option("--num-draft", help="draft tokens per cycle (K)")] = None,
    survival: Annotated[Optional[str], typer.Option("--survival", help="s1,s2,...: P(first i drafts all accepted)")] = None,
    draft_cost_ratio: Annotated[Optional[float], typer.Option("--draft-cost-ratio", help="c = draft step / target step (Thm 3.8, optimal K)")] = None,
    draft_ms: Annotated[Optional[float], typer.Option("--draft-ms", help="draft time per cycle (ms)")] = None,
    overhead_ms: Annotated[Optional[float], typer.Option("--overhead-ms", help="other time per cycle (ms)")] = None,
    batch: Annotated[Optional[int], typer.Option("--batch", help="requests per step (throughput for the batch)")] = None,
    baseline_tps: Annotated[Optional[float], typer.Option("--baseline-tps", help="plain decode tokens/s per request")] = None,
    decode_ms: Annotated[Optional[float], typer.Option("--decode-ms", help="plain decode step time (ms)")] = None,
    source: Annotated[Optional[str], typer.Option("--from", help="breakdown JSON (verifyprof breakdown --json) or a trace")] = None,
    manifest: Annotated[Optional[Path], typer.Option("--manifest", help="capture manifest.json (accept length, baseline)")] = None,
    step: Annotated[Optional[str], typer.Option("--step", help="step name to model (default: the verify steps)")] = None,
    step_range: RangeOpt = DEFAULT_STEP_REGEX,
    whole_trace: Annotated[bool, typer.Option("--whole-trace", help="model the whole trace as one step (a trace given to --from)")] = False,
    width: Annotated[Optional[int], typer.Option("--width", help="verify tokens per request: which width to model, or the width when the trace does not say")] = None,
    mode: Annotated[Optional[str], typer.Option("--mode", help="eager or graph, when the trace has both")] = None,
    hardware: Annotated[Optional[str], typer.Option("--hardware", help="hardware name (h200, h100, rtx-pro-6000, ...) or TOML file")] = None,
    link: Annotated[Optional[str], typer.Option("--link", help="override the GPU link: pcie_gen4, pcie_gen5, nvlink4, nvlink5")] = None,
    model: Annotated[Optional[str], typer.Option("--model", help="model config name (kimi-k2, deepseek-v3, workload) or TOML file")] = None,
    tp: Annotated[Optional[int], typer.Option("--tp", help="tensor-parallel size")] = None,
    context: Annotated[Optional[float], typer.Option("--context", help="context length (tokens) for the attention floor")] = None,
    drafter_gain: Annotated[Optional[float], typer.Option("--drafter-gain", help="accept-length gain assumed by better_drafter (default: published drafter data)")] = None,
    candidate: Annotated[Optional[list[str]], typer.Option("--candidate", help="only these candidates (repeatable)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Throughput model: tokens/s from verify time and accept length, or candidates ranked from a breakdown."""
    from verifyprof import pipeline
    from verifyprof.model.whatif import WhatifOptions
    from verifyprof.report import files
    from verifyprof.report import whatif as show

    options = WhatifOptions(
        verify_ms=verify_ms, accept_len=accept_len, alpha=alpha, num_draft=num_draft, survival=survival,
        draft_cost_ratio=draft_cost_ratio, draft_ms=draft_ms, overhead_ms=overhead_ms, batch=batch,
        baseline_tps=baseline_tps, decode_ms=decode_ms, source=source, manifest=manifest, step=step,
        step_range=step_range, whole_trace=whole_trace, width=width, mode=mode, hardware=hardware, link=link, model=model, tp=tp,
        context=context, drafter_gain=drafter_gain, candidates=candidate or [],
    )
    if source is None:
        result = pipeline.whatif_plain(options)
        files.print_json(result) if as_json else show.print_plain(result)
    else:
        ranking = pipeline.whatif(options).to_json()
        files.print_json(ranking) if as_json else show.print_ranking(ranking)


@app.command()
def hooks(
    spec: Annotated[str, typer.Argument(help="presets and targets: sglang, hf-assisted, workload, module:qualname=phase (comma-separated)")] = "sglang",
    program: Annotated[Optional[list[str]], typer.Argument(help="the program to be captured (-- python script.py): its folder is searched as Python will", show_default=False)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Which hook targets exist in the installed packages (and the program's own folder, default
    the current one): run before a capture to see what will be wrapped."""
    import os as _os

    from verifyprof.capture.hooks import api as hook_api
    from verifyprof.capture.hooks.search_path import program_folder
    from verifyprof.report import console, files

    folder = program_folder(program) if program else None
    statuses = hook_api.check(spec, path=[p for p in (folder, _os.getcwd()) if p is not None])
    if as_json:
        files.print_json([s.to_json() for s in statuses])
    else:
        console.print_hooks(spec, statuses)
    if any(s.state == "missing" for s in statuses):
        raise typer.Exit(1)


def main() -> None:
    try:
        app()
    except VerifyprofError as err:
        print(f"verifyprof: error: {err}", file=sys.stderr)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        print("verifyprof: interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
