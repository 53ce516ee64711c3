"""The command line: parse, call one stage, print. No analysis lives here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from verifyprof.errors import VerifyprofError
from verifyprof.ranges import DEFAULT_STEP_REGEX

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
) -> None:
    """Per verify step and per GPU: where the time went (phases sum to the step's wall time)."""
    from verifyprof.attribution.breakdown import breakdown as run_breakdown
    from verifyprof.attribution.taxonomy import load_taxonomy
    from verifyprof.report import console, files
    from verifyprof.trace import load_trace

    result = run_breakdown(load_trace(trace), step_regex=step_range, taxonomy=load_taxonomy(taxonomy), whole_trace=whole_trace)
    if csv is not None:
        files.write_steps_csv(result, csv)
    if parquet is not None:
        files.write_steps_parquet(result, parquet)
    if as_json:
        files.print_json(result.to_json())
    else:
        console.print_breakdown(result)


@app.command()
def kernels(
    trace: TraceArg,
    top: Annotated[int, typer.Option("--top", help="how many kernels to list")] = 30,
    taxonomy: TaxonomyOpt = None,
    step_range: Annotated[Optional[str], typer.Option("--range", help="only kernels inside ranges matching this regex")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Top kernels with their phase and share of GPU time: check and fix the taxonomy rules."""
    from verifyprof.attribution.kernels import kernel_table
    from verifyprof.attribution.taxonomy import load_taxonomy
    from verifyprof.report import console, files
    from verifyprof.trace import load_trace

    table = kernel_table(load_trace(trace), load_taxonomy(taxonomy), step_regex=step_range)
    if as_json:
        files.print_json(table.to_json(top))
    else:
        console.print_kernels(table, top)


# --- whatif (model stage) and capture (capture stage) register their commands below. ---


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
