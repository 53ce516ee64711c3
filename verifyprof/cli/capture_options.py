"""The options of ``capture`` and ``hooks``, one alias each."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

ProgramOpt = Annotated[
    Optional[list[str]],
    typer.Argument(
        help="an offline program to run instead of a server: -- python script.py ...",
        metavar="PROGRAM",
        show_default=False,
    ),
]

ServerCmdOpt = Annotated[
    Optional[str],
    typer.Option(
        "--server-cmd",
        help='server command line, e.g. "python -m sglang.launch_server --model-path ..."',
    ),
]

PortOpt = Annotated[
    Optional[int],
    typer.Option("--port", help="server port (default: --port of --server-cmd, else 30000)"),
]

OutOpt = Annotated[
    Optional[Path],
    typer.Option("--out", help="new output directory (default: verifyprof-capture-<time>)"),
]

BackendOpt = Annotated[
    str,
    typer.Option(
        "--backend",
        help="nsys, torch (SGLang's own torch-profiler traces; server only) or none",
    ),
]

RequestsOpt = Annotated[int, typer.Option("--requests", help="measured requests")]

ConcurrencyOpt = Annotated[
    str,
    typer.Option(
        "--concurrency",
        help=(
            "requests in flight at once; several (1,8,32): each load driven in turn in one"
            " trace, its window and rates in the manifest's loads (whatif models them as one)"
        ),
    ),
]

BatchesOpt = Annotated[
    Optional[str],
    typer.Option(
        "--batches",
        help=(
            "a program captured once per batch size (1,8,32): {batch} in its command (and in"
            " --decode-cmd) replaced, each capture in OUT/batch-N; whatif OUT reads them all"
        ),
    ),
]

AgainOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--again",
        help=(
            "run a capture's own recorded command again (its folder, a --batches folder or its"
            " manifest.json): the options given here replace the same ones, its --out and load"
            " lists are never carried over, {batch}/{context}/{num_draft} not swept are its own"
            " values, and a program after -- replaces its program"
        ),
        show_default=False,
    ),
]

NumDraftsOpt = Annotated[
    Optional[str],
    typer.Option(
        "--num-drafts",
        help=(
            "a program captured once per draft count (1,4): {num_draft} in its command replaced,"
            " each capture in --out/k-N (with --batches: batch-N_k-N, every combination)"
        ),
    ),
]

ContextsOpt = Annotated[
    Optional[str],
    typer.Option(
        "--contexts",
        help=(
            "a program captured once per context (512,2048 tokens): {context} in its command"
            " replaced, each capture in --out/ctx-N (with the other lists: every combination)"
        ),
    ),
]

ProgramContextOpt = Annotated[
    Optional[int],
    typer.Option(
        "--program-context",
        min=1,
        help=(
            "the context (tokens per request) the program runs at, where its command does not"
            " say: recorded in the manifest for whatif"
        ),
    ),
]

InputLenOpt = Annotated[
    Optional[int],
    typer.Option("--input-len", help="approximate prompt tokens (built-in prompts grown or cut)"),
]

OutputLenOpt = Annotated[
    int, typer.Option("--output-len", help="tokens generated per request (EOS ignored)")
]

PromptsOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--prompts", help='JSONL prompts: {"prompt": ..., "max_new_tokens": ...} per line'
    ),
]

WarmupOpt = Annotated[int, typer.Option("--warmup", help="requests before the capture starts")]

TemperatureOpt = Annotated[
    float, typer.Option("--temperature", help="sampling temperature (0: greedy)")
]

HealthTimeoutOpt = Annotated[
    float, typer.Option("--health-timeout", help="seconds to wait for /health")
]

RequestTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--request-timeout",
        help="seconds one request may go unanswered; then the server is taken as hung and the"
        " capture ends, outputs kept",
    ),
]

DeadlineOpt = Annotated[
    float,
    typer.Option(
        "--deadline",
        help="seconds the whole workload may take from /health on (warm-up, every load, the"
        " unprofiled requests); then the capture ends, outputs kept",
    ),
]

HooksOpt = Annotated[
    Optional[str],
    typer.Option(
        "--hooks",
        help="hook presets, comma-separated (default: sglang for a server, none for a program)",
    ),
]

HookOpt = Annotated[
    Optional[list[str]],
    typer.Option("--hook", help="extra hook module:qualname=phase (repeatable)"),
]

NumStepsOpt = Annotated[
    Optional[int],
    typer.Option("--num-steps", help="profile only this many forward steps (SGLang num_steps)"),
]

OsrtOpt = Annotated[bool, typer.Option("--osrt", help="nsys: also trace OS runtime calls")]

CaptureAllOpt = Annotated[
    bool,
    typer.Option(
        "--capture-all", help="program: profile all of it, not just cudaProfilerStart..Stop"
    ),
]

GzipOpt = Annotated[
    bool, typer.Option("--gzip", help="nsys: gzip the SQLite export (capture.sqlite.gz)")
]

StopTimeoutOpt = Annotated[
    float,
    typer.Option("--stop-timeout", help="seconds after SIGINT before SIGTERM (then SIGKILL)"),
]

AllowMissingHooksOpt = Annotated[
    bool,
    typer.Option(
        "--allow-missing-hooks",
        help="exit 0 even if no hook fired and no verifyprof range was recorded",
    ),
]

BaselineRunOpt = Annotated[
    bool,
    typer.Option(
        "--baseline-run",
        help=(
            "program: run it once unprofiled first (no nsys, no hooks) to measure the"
            " profiler's dilation"
        ),
    ),
]

BaselineRepeatOpt = Annotated[
    int,
    typer.Option(
        "--baseline-repeat",
        help=(
            "with --baseline-run: that many unprofiled runs, the median rate the anchor (a noisy"
            " host's processes differ by tens of %)"
        ),
    ),
]

UnprofiledRequestsOpt = Annotated[
    Optional[int],
    typer.Option(
        "--unprofiled-requests",
        help=(
            "server: requests after the profile window, for the dilation (default: max(4,"
            " concurrency), at most --requests; 0: none)"
        ),
    ),
]

DecodeCmdOpt = Annotated[
    Optional[str],
    typer.Option(
        "--decode-cmd",
        help=(
            "program: the same program with speculation off (a command line), run unprofiled"
            " after the capture: its tokens_per_s_per_request (else tokens_per_s) is the"
            " plain-decoding baseline"
        ),
    ),
]

ResultOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--result",
        help=(
            "program: NAME=REGEX (repeatable): after each run, the last match's group 1 in its"
            " printed output becomes results[NAME], e.g. 'tokens_per_s=Average tokens/sec:"
            " ([0-9.]+)'; NAME[]=REGEX keeps every match as a list (tokens_per_s_samples[]:"
            " the rate of each sample, whose medians the dilation then takes)"
        ),
    ),
]

AcceptLenConventionOpt = Annotated[
    Optional[str],
    typer.Option(
        "--accept-len-convention",
        help=(
            "program: its accept_len counts tokens_per_verify (bonus included) or"
            " accepted_drafts (converted +1)"
        ),
    ),
]

SpecOpt = Annotated[
    str,
    typer.Argument(
        help=(
            "presets and targets: sglang, hf-assisted, workload, module:qualname=phase"
            " (comma-separated)"
        ),
        metavar="SPEC",
    ),
]

HooksProgramOpt = Annotated[
    Optional[list[str]],
    typer.Argument(
        help=(
            "the program to be captured (-- python script.py): its folder is searched as Python"
            " will"
        ),
        metavar="PROGRAM",
        show_default=False,
    ),
]
