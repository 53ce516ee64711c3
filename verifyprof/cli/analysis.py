"""``breakdown``, ``kernels`` and ``whatif``: parse, resolve the inputs once, print."""

from __future__ import annotations

from verifyprof.cli.app import app
from verifyprof.cli.args import (
    _check_manifest,
    _check_run,
    _nsys_hint,
    _parallel,
    _refuse_picks,
    _wrote,
)
from verifyprof.cli.load_declarations import (
    CaptureContextOpt,
    LoadOptionOpt,
    capture_contexts,
    load_options,
)
from verifyprof.cli.option_aliases import (
    AcceptLenOpt,
    AlphaOpt,
    AssumeCapturableOpt,
    BaselineTpsOpt,
    BatchOpt,
    CandidateOpt,
    ContextOpt,
    CsvOpt,
    DecodeMsOpt,
    DetailsOpt,
    DraftCostRatioOpt,
    DrafterGainOpt,
    DraftMsOpt,
    HardwareOpt,
    JsonOpt,
    KernelsAllOpt,
    KernelsManifestOpt,
    KernelsStepOpt,
    KernelsWholeTraceOpt,
    LinkOpt,
    ManifestOpt,
    ModelOpt,
    ModeOpt,
    NumDraftOpt,
    OverheadMsOpt,
    ParquetOpt,
    QuietOpt,
    RangeOpt,
    SchedulerOpt,
    ShowAllOpt,
    SourceOpt,
    StepOpt,
    StepRangeOpt,
    StrictOpt,
    SurvivalOpt,
    TaxonomyOpt,
    TopOpt,
    TpOpt,
    TraceArg,
    TracesArg,
    VerifyMsOpt,
    WhatifAcceptLenOpt,
    WhatifManifestOpt,
    WhatifSourceArg,
    WhatifStepOpt,
    WhatifWholeTraceOpt,
    WholeTraceOpt,
    WidthOpt,
    WorkersOpt,
)
from verifyprof.contracts.bounds import TOP_KERNELS
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.plumbing import collector


def _captures(given: list[str] | None, source: str | None) -> tuple[tuple, list[str], str | None]:
    """What whatif models (arguments, or --from): ``expanded_captures``' (captures, left out: a
    --batches folder stands for its captures, any cut short left out), the captures, and
    today's, the first. The run is opened on that expansion, so that it says which were left
    out, and reads each capture's manifest for it once."""
    from verifyprof.pipeline.capture_inputs import expanded_captures

    found = expanded_captures(list(given or []))
    captures = found[0]
    if captures and source is not None and captures != [source]:
        raise VerifyprofError(
            f"two inputs: {captures[0]} and --from {source}; give the captures as arguments"
        )
    if not captures and source is not None:
        found = expanded_captures([source])
        captures = found[0]
    return found, captures, (captures[0] if captures else None)


def _number_list(text: str | None, option: str, kind: type) -> tuple:
    """One number (today's value, the old meaning) or a comma list (the load curve's values):
    (value, None) or (None, values); bounds are checked with the other numbers."""
    if text is None:
        return None, None
    try:
        values = tuple(kind(v) for v in text.split(","))
    except ValueError:
        raise VerifyprofError(
            f"invalid value for '{option}': a number or a comma-separated list of"
            f" {kind.__name__}s, got {text!r:.60}"
        ) from None
    return (values[0], None) if len(values) == 1 else (None, values)


def _plain_or_trace(source: str | None, verify_ms: float | None) -> None:
    if source is not None and verify_ms is not None:
        raise VerifyprofError(
            "--verify-ms is for the plain model; with --from the verify time is measured from the"
            " trace (choose it with --step, --width, --mode)"
        )


def _steps_or_whole_trace(traces: list[str], options, parallel, taxonomy):
    """The run, read and resolved; a trace in which no range is a step (none of the default
    ranges, and neither --step nor --range asked for one) is broken down as the whole trace, as
    ``kernels`` lists it: (run, why) then, else (run, None)."""
    from dataclasses import replace

    from verifyprof import pipeline
    from verifyprof.contracts.errors import NoStepsError

    run = pipeline.open_run(traces, options, parallel, taxonomy=taxonomy, parts=True)
    try:
        run.resolved  # noqa: B018 - read and resolved inside the status line
        return run, None
    except NoStepsError as err:
        asked = options.step is not None or options.step_range is not None
        if asked or options.whole_trace or not err.problem.startswith("no range is a step"):
            raise
        why = err.problem.split(":")[0]  # "no range is a step"
    whole = replace(options, whole_trace=True)
    run = pipeline.open_run(traces, whole, parallel, taxonomy=taxonomy, parts=True)
    run.resolved  # noqa: B018
    return run, why


@app.command()
def breakdown(
    traces: TracesArg,
    step_range: RangeOpt = None,
    step: StepOpt = None,
    taxonomy: TaxonomyOpt = None,
    whole_trace: WholeTraceOpt = False,
    show_all: ShowAllOpt = False,
    as_json: JsonOpt = False,
    csv: CsvOpt = None,
    parquet: ParquetOpt = None,
    accept_len: AcceptLenOpt = None,
    manifest: ManifestOpt = None,
    width: WidthOpt = None,
    mode: ModeOpt = None,
    workers: WorkersOpt = None,
    scheduler: SchedulerOpt = None,
    strict: StrictOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Per verify step and per GPU: where the time went (phases sum to the step's wall time)."""
    from verifyprof import pipeline
    from verifyprof.contracts.plumbing import outputs

    _refuse_picks(None, mode, "--whole-trace" if whole_trace else None)  # --width: its width
    options = pipeline.WhatifOptions(
        accept_len=accept_len, manifest=manifest, step=step, step_range=step_range,
        whole_trace=whole_trace, width=width, mode=mode,  # --width, --mode: as whatif picks
    )  # fmt: skip
    pipeline.check(options, parts=True)  # every option before any input or output
    _check_run(  # inputs, file options, numbers and outputs, before any work (issue 22)
        sources={"": traces},
        files={"--manifest": manifest, "--taxonomy": taxonomy},
        outputs={"--csv": csv, "--parquet": parquet},
        numbers={"--accept-len": accept_len, "--workers": workers},
    )
    on_stdout = "--json" if as_json else None  # then no output may be stdout
    outputs.protect(
        [p for spec in traces for p in pipeline.expand(spec)], (csv, parquet), on_stdout
    )
    if manifest is not None:
        _check_manifest(manifest)
    run, whole, result = _broken_down(
        traces, options, (workers, scheduler, strict), quiet, taxonomy
    )
    from verifyprof.report import console, files, integrity_warnings  # loaded under the status

    if result is None:
        raise VerifyprofError(
            "breakdown reads traces; this is a breakdown JSON already (give it to whatif --from,"
            " compare or report)",
            traces[0],
        )
    if whole is not None:  # said where --whole-trace is said (the table, the JSON's options)
        result.options["whole_trace_because"] = whole
    verdict = run.verdict  # before any file: a failure writes nothing
    for path, write in ((csv, files.write_steps_csv), (parquet, files.write_steps_parquet)):
        if path is not None:
            write(result, path)
            if not quiet:  # --quiet: no "wrote" line, as in every command
                _wrote(path)
    if as_json:
        files.print_breakdown_json(result, verdict)  # the verdict as whatif --json has it
        integrity_warnings.warn_integrity(result.integrity_records(), ", ".join(traces))
        return
    if outputs.writes_stdout(csv, parquet):  # the rows alone on stdout
        return
    group = run.group.key if run.group else None
    scope = run.scope
    console.print_breakdown(result, show_all=show_all, group=group, scope=scope)
    console.print_notes(run.notes)
    # several devices: the verdict's steps are one device's, the table's all devices'
    console.print_verdict(
        verdict["verdict"], scope.words() if scope and scope.devices > 1 else None
    )


def _broken_down(traces: list[str], options, mapping: tuple, quiet: bool, taxonomy):
    """The breakdown's run (and whole-trace reason, and breakdown) under the status line, the
    map's (workers, scheduler, strict) and its read started ahead; the report modules load
    meanwhile. A read started early and not taken (the run failed first) is not kept."""
    from verifyprof import pipeline
    from verifyprof.report import progress

    try:
        with (
            _nsys_hint(traces[0]),
            progress.status(f"breaking down {', '.join(traces)[:60]}", quiet) as shown,
        ):
            with collector.loading():  # pandas, the analysis, the run's and report's modules
                parallel = _parallel(*mapping, shown, read_ahead=traces)
                from verifyprof.pipeline import reading, resolve  # noqa: F401
                from verifyprof.report import console, files, integrity_warnings  # noqa: F401

            run, whole = _steps_or_whole_trace(traces, options, parallel, taxonomy)
        return run, whole, run.breakdown
    finally:
        pipeline.drop_read_ahead()


@app.command()
def kernels(
    trace: TraceArg,
    top: TopOpt = TOP_KERNELS,
    taxonomy: TaxonomyOpt = None,
    step_range: StepRangeOpt = None,
    step: KernelsStepOpt = None,
    every_step: KernelsAllOpt = False,
    whole_trace: KernelsWholeTraceOpt = False,
    manifest: KernelsManifestOpt = None,
    width: WidthOpt = None,
    mode: ModeOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Top kernels of the verdict's step group (the one whatif and the report are about), per
    kernel its calls per step and one call's spread: the step's kernels, and the taxonomy's
    phase of each."""

    from verifyprof import pipeline

    chosen = [o for o, on in (("--range", step_range), ("--step", step)) if on is not None]
    chosen += [o for o, on in (("--all", every_step), ("--whole-trace", whole_trace)) if on]
    if len(chosen) > 1:
        raise VerifyprofError(f"give one of {', '.join(chosen)} (each chooses the steps listed)")
    _refuse_picks(width, mode, chosen[0] if chosen and chosen != ["--step"] else None)
    options = pipeline.WhatifOptions(
        step=step, step_range=step_range, manifest=manifest, width=width, mode=mode
    )
    pipeline.check(options, parts=True)  # one line before any file is read
    scope = "range" if step_range is not None else "all" if every_step else "story"
    scope = "whole-trace" if whole_trace else scope
    _check_run(  # before any work
        sources={"": [trace]}, files={"--taxonomy": taxonomy, "--manifest": manifest}
    )
    from verifyprof.report import progress  # after the checks; the rest under the status line

    with _nsys_hint(trace), progress.status(f"reading {trace[:60]}", quiet):
        from verifyprof.report import console, files, integrity_warnings

        table = pipeline.kernels(trace, options, scope, taxonomy)
    data = {"schema": pipeline.KERNELS_SCHEMA, "unit": "ns", **table.to_json(top)}
    if as_json:
        files.print_json(data)
        integrity_warnings.warn_integrity(data.get("integrity", []), trace)
    else:
        console.print_kernels(data)


@app.command()
def whatif(
    given_source: WhatifSourceArg = None,
    verify_ms: VerifyMsOpt = None,
    accept_len: WhatifAcceptLenOpt = None,
    alpha: AlphaOpt = None,
    num_draft: NumDraftOpt = None,
    survival: SurvivalOpt = None,
    draft_cost_ratio: DraftCostRatioOpt = None,
    draft_ms: DraftMsOpt = None,
    overhead_ms: OverheadMsOpt = None,
    batch: BatchOpt = None,
    baseline_tps: BaselineTpsOpt = None,
    decode_ms: DecodeMsOpt = None,
    source: SourceOpt = None,
    manifest: WhatifManifestOpt = None,
    step: WhatifStepOpt = None,
    step_range: RangeOpt = None,
    whole_trace: WhatifWholeTraceOpt = False,
    width: WidthOpt = None,
    mode: ModeOpt = None,
    hardware: HardwareOpt = None,
    link: LinkOpt = None,
    model: ModelOpt = None,
    tp: TpOpt = None,
    context: ContextOpt = None,
    drafter_gain: DrafterGainOpt = None,
    assume_capturable: AssumeCapturableOpt = False,
    candidate: CandidateOpt = None,
    load_option: LoadOptionOpt = None,
    capture_context: CaptureContextOpt = None,
    details: DetailsOpt = False,
    as_json: JsonOpt = False,
    workers: WorkersOpt = None,
    scheduler: SchedulerOpt = None,
    strict: StrictOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Throughput model: tokens/s from verify time and accept length, or candidates ranked from a
    breakdown."""
    from verifyprof import pipeline

    found, captures, source = _captures(given_source, source)  # captures checked below
    today_batch, batches = _number_list(batch, "--batch", int)  # one number, or the load curve's
    today_context, contexts = _number_list(context, "--context", float)
    options = pipeline.WhatifOptions(  # each option by its name, so each can be followed
        verify_ms=verify_ms, accept_len=accept_len, alpha=alpha, num_draft=num_draft,
        survival=survival, draft_cost_ratio=draft_cost_ratio, draft_ms=draft_ms,
        overhead_ms=overhead_ms, batch=today_batch, baseline_tps=baseline_tps, decode_ms=decode_ms,
        source=source, manifest=manifest, step=step, step_range=step_range,
        whole_trace=whole_trace, width=width, mode=mode, hardware=hardware, link=link,
        model=model, tp=tp, context=today_context, drafter_gain=drafter_gain,
        candidates=list(candidate or []), assume_capturable=assume_capturable, batches=batches,
        contexts=contexts, load_options=load_options(load_option),
        capture_contexts=capture_contexts(capture_context),
    )  # fmt: skip

    _refuse_picks(None, mode, "--whole-trace" if whole_trace else None)  # --width: its width
    _plain_or_trace(source, verify_ms)
    _check_run(  # inputs, file options and numbers, before any work (issue 22)
        sources={"": captures},
        files={"--manifest": manifest},
        data={"--hardware": hardware, "--model": model},
        numbers={"--workers": workers},
    )
    if manifest is not None:
        _check_manifest(manifest)
    from verifyprof.report import progress  # after the checks

    if source is None:
        _print_plain(options, as_json, details)
        return
    pipeline.check(options)
    with progress.status(f"breaking down {source[:60]} and ranking fixes", quiet) as shown:
        parallel = _parallel(workers, scheduler, strict, shown)
        run = pipeline.open_run(captures, options, parallel, captures=True, expanded=found)
        ranking = run.ranking  # of every capture's model (run.joined), or today's alone
    _print_ranking(run, ranking, source, as_json, details)


def _print_plain(options, as_json: bool, details: bool) -> None:
    """``whatif`` without a breakdown: plain numbers."""
    from verifyprof import pipeline
    from verifyprof.report import files
    from verifyprof.report import whatif_console as show

    plain = pipeline.open_run([], options).ranking  # plain numbers: a run of no inputs
    result = {"schema": pipeline.WHATIF_SCHEMA, "unit": "ms", **plain.to_json()}
    files.print_json(result) if as_json else show.print_plain(result, details=details)


def _print_ranking(run, ranking, source: str, as_json: bool, details: bool) -> None:
    """``whatif`` of a breakdown: the ranking, or the one line saying why there is none, with the
    trace's problems and every capture that did not finish."""
    from verifyprof.report import files, integrity_warnings
    from verifyprof.report import whatif_console as show

    for capture, said in run.unfinished:  # a capture that did not finish is said, always
        integrity_warnings.warn_integrity([{"message": said}], capture)
    problems = run.frame.integrity  # the trace's, as breakdown names them (issue 22)
    if ranking is None:
        integrity_warnings.warn_integrity(problems, source)
        run.ranked(source)  # the one line saying why there is no plan
    data = ranking.to_json() | ({"integrity": problems} if problems else {})
    if run.unfinished:  # what stderr warns of, for a reader of the JSON alone
        data["unfinished_captures"] = [{"capture": c, "why": w} for c, w in run.unfinished]
    files.print_json(data) if as_json else show.print_ranking(data, details=details)
    integrity_warnings.warn_integrity(problems, source)
