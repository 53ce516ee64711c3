"""The command line's options, one alias each: command signatures stay one line per option."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from verifyprof.contracts import ranges
from verifyprof.contracts.datafiles import BUILTIN

PHASES = ", ".join(ranges.BY_PHASE)  # spaced: a help line breaks between phases, never inside
MODELS = ", ".join(sorted(p.stem for p in (BUILTIN / "models").glob("*.toml")))
HARDWARE = ", ".join(
    sorted(p.stem for p in (BUILTIN / "hardware").glob("*.toml") if p.stem != "links")
)
QUIET_HELP = "no progress line and no 'wrote FILE' line: only what was asked for, and warnings"

TraceArg = Annotated[
    str,
    typer.Argument(
        help=(
            "nsys .nsys-rep / .sqlite(.gz), PyTorch-profiler JSON(.gz), a directory (capture folder"
            " or per-rank files) or a glob"
        ),
        metavar="TRACE",
        show_default=False,
    ),
]

RangeOpt = Annotated[
    Optional[str],
    typer.Option(
        "--range",
        help=(
            "regex (Python re.search on each range's text) selecting the step ranges; default:"
            " the spec_step, draft, verify, accept, draft_extend and decode ranges of verifyprof,"
            " SGLang (TARGET_VERIFY, DECODE, ...) and their usual user spellings"
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
            f" {PHASES}"
        ),
        metavar="PHASE",
    ),
]

QuietOpt = Annotated[bool, typer.Option("--quiet", help=QUIET_HELP)]

TaxonomyOpt = Annotated[
    Optional[Path],
    typer.Option("--taxonomy", help="kernel-name rules (TOML) replacing the built-in ones"),
]

DetailsOpt = Annotated[
    bool,
    typer.Option(
        "--details",
        help=(
            "whatif: print everything behind the decision (the step and its notes, the plan and"
            " every candidate with its assumptions, the draft-count curve, the load tables)"
        ),
    ),
]
JsonOpt = Annotated[
    bool,
    typer.Option("--json", help="print machine-readable JSON instead of tables (a flag: no value)"),
]

TracesArg = Annotated[
    list[str],
    typer.Argument(
        help=(
            "trace file(s), directories or globs; several files (one per rank, stage or node) are"
            " broken down in parallel and reduced to one multi-rank result"
        ),
        metavar="TRACE",
        show_default=False,
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

WholeTraceOpt = Annotated[
    bool, typer.Option("--whole-trace", help="one step per device spanning the whole trace")
]

ShowAllOpt = Annotated[
    bool,
    typer.Option(
        "--all",
        help=(
            "a phase table for every step group (default: the verify step's, the rest folded"
            " into one table)"
        ),
    ),
]

CsvOpt = Annotated[Optional[Path], typer.Option("--csv", help="write per-step rows as CSV")]

ParquetOpt = Annotated[
    Optional[Path], typer.Option("--parquet", help="write per-step rows as Parquet")
]

AcceptLenOpt = Annotated[
    Optional[float],
    typer.Option("--accept-len", help="accept length: the verdict adds the plan's first fix"),
]

ManifestOpt = Annotated[
    Optional[Path],
    typer.Option("--manifest", help="capture manifest.json (accept length) for the verdict"),
]

KernelsManifestOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--manifest",
        help="capture manifest.json: its measured run's mode picks the verify group, as whatif's",
    ),
]

TopOpt = Annotated[int, typer.Option("--top", help="how many kernels to list (>= 1)", min=1)]

StepRangeOpt = Annotated[
    Optional[str],
    typer.Option(
        "--range", help="only kernels inside ranges matching this regex (Python re.search)"
    ),
]

KernelsStepOpt = Annotated[
    Optional[str],
    typer.Option(
        "--step",
        help=(
            f"the kernels of one phase's step group ({PHASES}: verifyprof,"
            " SGLang and user ranges alike) or of a step name; verify (the default): the"
            " verdict's group, as whatif and the report pick it"
        ),
    ),
]

KernelsAllOpt = Annotated[
    bool,
    typer.Option("--all", help="the kernels of every step (every group, width sweeps included)"),
]

KernelsWholeTraceOpt = Annotated[
    bool, typer.Option("--whole-trace", help="every kernel of the trace, inside steps or not")
]

VerifyMsOpt = Annotated[Optional[float], typer.Option("--verify-ms", help="verify step time (ms)")]

WhatifAcceptLenOpt = Annotated[
    Optional[float],
    typer.Option("--accept-len", help="mean accepted tokens per cycle, bonus included"),
]

AlphaOpt = Annotated[
    Optional[float],
    typer.Option("--alpha", help="i.i.d. acceptance rate (Leviathan Eq. 1), with --num-draft"),
]

NumDraftOpt = Annotated[
    Optional[int], typer.Option("--num-draft", help="draft tokens per cycle (K)")
]

SurvivalOpt = Annotated[
    Optional[str], typer.Option("--survival", help="s1,s2,...: P(first i drafts all accepted)")
]

DraftCostRatioOpt = Annotated[
    Optional[float],
    typer.Option("--draft-cost-ratio", help="c = draft step / target step (Thm 3.8, optimal K)"),
]

DraftMsOpt = Annotated[
    Optional[float], typer.Option("--draft-ms", help="draft time per cycle (ms)")
]

OverheadMsOpt = Annotated[
    Optional[float], typer.Option("--overhead-ms", help="other time per cycle (ms)")
]

BatchOpt = Annotated[
    Optional[str],
    typer.Option(
        "--batch",
        help="requests per step (one number: today's batch) or the load curve's batch sizes"
        " (a list: 1,8,32)",
    ),
]

BaselineTpsOpt = Annotated[
    Optional[float], typer.Option("--baseline-tps", help="plain decode tokens/s per request")
]

DecodeMsOpt = Annotated[
    Optional[float], typer.Option("--decode-ms", help="plain decode step time (ms)")
]

SourceOpt = Annotated[
    Optional[str],
    typer.Option(
        "--from",
        help=(
            "breakdown JSON (verifyprof breakdown --json), a trace, or several trace files"
            " (directory or quoted glob)"
        ),
    ),
]

WhatifSourceArg = Annotated[
    Optional[list[str]],
    typer.Argument(
        metavar="SOURCE",
        help="what --from takes; several captures of one program make one model (today's first)",
        show_default=False,
    ),
]

WhatifManifestOpt = Annotated[
    Optional[Path],
    typer.Option("--manifest", help="capture manifest.json (accept length, baseline)"),
]

WhatifStepOpt = Annotated[
    Optional[str],
    typer.Option(
        "--step",
        help=(
            f"the steps to model: a phase ({PHASES}: verifyprof, SGLang and"
            " user ranges alike) or a step name (default: the verify steps)"
        ),
    ),
]

WhatifWholeTraceOpt = Annotated[
    bool,
    typer.Option(
        "--whole-trace", help="model the whole trace as one step (a trace given to --from)"
    ),
]

WidthOpt = Annotated[
    Optional[int],
    typer.Option(
        "--width",
        help=(
            "verify tokens per request: which width to model, or the width when the trace does"
            " not say"
        ),
    ),
]

ModeOpt = Annotated[
    Optional[str],
    typer.Option(
        "--mode",
        help=(
            "eager or graph, when the trace has both; compile: a torch.compile run's steps"
            " (compile=1), its cycle's draft steps kept"
        ),
    ),
]

HardwareOpt = Annotated[
    Optional[str],
    typer.Option("--hardware", help=f"hardware name ({HARDWARE}) or TOML file"),
]

LinkOpt = Annotated[
    Optional[str],
    typer.Option("--link", help="override the GPU link: pcie_gen4, pcie_gen5, nvlink4, nvlink5"),
]

ModelOpt = Annotated[
    Optional[str],
    typer.Option("--model", help=f"model config name ({MODELS}) or TOML file"),
]

TpOpt = Annotated[Optional[int], typer.Option("--tp", help="tensor-parallel size")]

ContextOpt = Annotated[
    Optional[str],
    typer.Option(
        "--context",
        help="context length (tokens) for the attention floor; a list (512,2048): the load"
        " curve's context lengths",
    ),
]

DrafterGainOpt = Annotated[
    Optional[float],
    typer.Option(
        "--drafter-gain",
        help="accept-length gain assumed by better_drafter (default: published drafter data)",
    ),
]

AssumeCapturableOpt = Annotated[
    bool,
    typer.Option(
        "--assume-capturable",
        help=(
            "rank graph and compile fixes as if the steps' host syncs and shape changes were"
            " gone (they are otherwise listed after the rest, with what must change)"
        ),
    ),
]

CandidateOpt = Annotated[
    Optional[list[str]], typer.Option("--candidate", help="only these candidates (repeatable)")
]
