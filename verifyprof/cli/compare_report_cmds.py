"""``compare`` (before/after, with the prediction of the change) and ``report`` (one HTML
file)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Optional

import typer

from verifyprof.cli.app import app
from verifyprof.cli.args import _check_manifest, _check_run, _refuse_picks, _wrote
from verifyprof.cli.load_declarations import (
    CaptureContextOpt,
    LoadOptionOpt,
    capture_contexts,
    load_options,
)
from verifyprof.cli.option_aliases import (
    BaselineTpsOpt,
    BatchOpt,
    ContextOpt,
    DecodeMsOpt,
    HardwareOpt,
    JsonOpt,
    ModelOpt,
    ModeOpt,
    QuietOpt,
    RangeOpt,
    StepOpt,
    TaxonomyOpt,
    WholeTraceOpt,
    WidthOpt,
)

# compare's and report's own options (the shared ones: cli/option_aliases.py)
BeforeOpt = Annotated[
    str, typer.Argument(help="a trace or a breakdown JSON", metavar="BEFORE", show_default=False)
]

AfterOpt = Annotated[
    str, typer.Argument(help="a trace or a breakdown JSON", metavar="AFTER", show_default=False)
]

CompareAcceptLenOpt = Annotated[
    Optional[float],
    typer.Option("--accept-len", help="accept length for the prediction check (BEFORE's whatif)"),
]

CompareManifestOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--manifest", help="BEFORE's capture manifest (accept length) for the prediction check"
    ),
]

GateOpt = Annotated[
    Optional[float],
    typer.Option(
        "--gate", help="exit 1 when verify got slower by more than PCT percent", metavar="PCT"
    ),
]

CompareWholeTraceOpt = Annotated[
    bool,
    typer.Option(
        "--whole-trace",
        help="compare one step per device spanning each whole trace (traces without ranges)",
    ),
]


ReportOutOpt = Annotated[
    Optional[Path],
    typer.Option(
        "-o",
        "--out",
        help="the HTML file to write (e.g. reports/NAME.html); optional with --json",
    ),
]

CompareWithOpt = Annotated[
    Optional[str],
    typer.Option("--compare", help="AFTER: a trace or breakdown JSON to compare SOURCE with"),
]

ReportAcceptLenOpt = Annotated[
    Optional[float],
    typer.Option("--accept-len", help="accept length for the what-if plan and the heatmap"),
]

ReportManifestOpt = Annotated[
    Optional[Path],
    typer.Option("--manifest", help="capture manifest (accept length, baseline) for the what-if"),
]

ReportSourcesArg = Annotated[
    list[str],
    typer.Argument(
        metavar="SOURCE",
        help="a trace or a breakdown JSON; several captures of one program make one model"
        " (today's first), as whatif makes it",
        show_default=False,
    ),
]


def _checked(options, manifest) -> None:
    """Every option before any input is read or output written (``options``: the command's
    numbers and step choice, as a ``WhatifOptions``)."""
    from verifyprof import pipeline

    pipeline.check(options)
    if manifest is not None:
        _check_manifest(manifest)


@app.command()
def compare(
    before: BeforeOpt,
    after: AfterOpt,
    accept_len: CompareAcceptLenOpt = None,
    manifest: CompareManifestOpt = None,
    gate: GateOpt = None,
    step_range: RangeOpt = None,
    step: StepOpt = None,
    taxonomy: TaxonomyOpt = None,
    whole_trace: CompareWholeTraceOpt = False,
    width: WidthOpt = None,
    mode: ModeOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Before/after: per-phase deltas of the verify step, launches, kernel families, ranks, a
    verdict, BEFORE's prediction of the change AFTER shows, and a CI gate."""
    from verifyprof import pipeline

    _refuse_picks(None, mode, "--whole-trace" if whole_trace else None)  # --width: its width
    _check_run(  # inputs, file options and numbers, before any work (issue 22)
        sources={"BEFORE": [before], "AFTER": [after]},
        files={"--manifest": manifest, "--taxonomy": taxonomy},
        numbers={"--accept-len": accept_len, "--gate": gate},
    )
    asked = pipeline.WhatifOptions(accept_len=accept_len, step=step, step_range=step_range)
    _checked(asked, manifest)  # --gate: a finite number in _check_run
    from verifyprof.report import compare_console as show  # after the checks
    from verifyprof.report import files, progress

    given = replace(asked, manifest=manifest, whole_trace=whole_trace, width=width, mode=mode)
    steps = replace(given, accept_len=None, manifest=None, mode=None)  # AFTER's: its steps
    with progress.status(f"comparing {before[:40]} with {after[:40]}", quiet):
        runs = [  # BEFORE's options are the comparison's (its prediction's too)
            pipeline.open_run([source], options, taxonomy=taxonomy, keep_trace=True)
            for source, options in ((before, given), (after, steps))
        ]
        result = runs[0].compare(runs[1])
    data = result.to_json(gate=gate)
    files.print_json(data) if as_json else show.print_compare(data)
    if gate is not None and result.gate_failed(gate):
        raise typer.Exit(1)


@app.command()
def report(
    sources: ReportSourcesArg,
    out: ReportOutOpt = None,
    compare_with: CompareWithOpt = None,
    accept_len: ReportAcceptLenOpt = None,
    manifest: ReportManifestOpt = None,
    step_range: RangeOpt = None,
    step: StepOpt = None,
    taxonomy: TaxonomyOpt = None,
    whole_trace: WholeTraceOpt = False,
    baseline_tps: BaselineTpsOpt = None,
    decode_ms: DecodeMsOpt = None,
    batch: BatchOpt = None,
    context: ContextOpt = None,
    model: ModelOpt = None,
    hardware: HardwareOpt = None,
    load_option: LoadOptionOpt = None,
    capture_context: CaptureContextOpt = None,
    quiet: QuietOpt = False,
    width: WidthOpt = None,
    mode: ModeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One self-contained HTML file (plotly.js inside: opens offline): verdict, plan, the draft
    count and load curves with each point's basis, steps, timeline, kernels, heatmap. --json
    prints the page's numbers (with -o, after writing it)."""
    from verifyprof import pipeline
    from verifyprof.cli.analysis import _number_list
    from verifyprof.contracts.errors import VerifyprofError
    from verifyprof.contracts.plumbing.outputs import writes_stdout
    from verifyprof.pipeline.capture_inputs import expanded_captures

    _refuse_picks(None, mode, "--whole-trace" if whole_trace else None)  # --width: its width
    if out is None and not as_json:
        raise VerifyprofError("report: give -o FILE for the page, or --json for its numbers")
    if as_json and out is not None and writes_stdout(out):
        raise VerifyprofError("report: -o - and --json both print on stdout: give -o a file")
    found = expanded_captures(sources)  # once: the run is opened on it
    captures = found[0]
    today_batch, batches = _number_list(batch, "--batch", int)  # one number, or the load curve's
    today_context, contexts = _number_list(context, "--context", float)
    declared = load_options(load_option), capture_contexts(capture_context)
    _check_run(  # inputs, file options, numbers and the -o file, before any work (issue 22)
        sources={"": captures, "the --compare input": [compare_with] if compare_with else []},
        files={"--manifest": manifest, "--taxonomy": taxonomy},
        data={"--hardware": hardware, "--model": model},
        outputs={"-o": out} if out is not None else {},
        numbers={"--accept-len": accept_len, "--baseline-tps": baseline_tps,
                 "--decode-ms": decode_ms},
    )  # fmt: skip
    asked = pipeline.WhatifOptions(  # the page's model: each option by its name
        accept_len=accept_len, step=step, step_range=step_range, baseline_tps=baseline_tps,
        decode_ms=decode_ms, batch=today_batch, batches=batches, context=today_context,
        contexts=contexts, model=model, hardware=hardware, load_options=declared[0],
        capture_contexts=declared[1],
    )  # fmt: skip
    _checked(asked, manifest)  # --width, --mode: picked (or refused) where the steps are read
    options = replace(asked, manifest=manifest, whole_trace=whole_trace, width=width, mode=mode)
    from verifyprof.report import progress

    with progress.status(f"reading {', '.join(captures)[:60]} for the report", quiet):
        data = pipeline.report(
            sources, compare_with, taxonomy=taxonomy, options=options, expanded=found
        )
    from verifyprof.report import integrity_warnings

    for capture, said in data.unfinished:  # as whatif warns: never used without a word
        integrity_warnings.warn_integrity([{"message": said}], capture)
    if out is not None:
        from verifyprof.report import html

        size = html.write_report(data, out)
        if not quiet and not writes_stdout(out):  # -o -: the page alone on stdout
            _wrote(out, f" ({size / 1e6:.1f} MB)", sys.stderr if as_json else sys.stdout)
    if as_json:
        from verifyprof.report import files
        from verifyprof.report.page_json import page_json

        files.print_json(page_json(data))
