"""``capture`` (run a server or program under nsys with the hooks) and ``hooks`` (what they
would wrap)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import typer

from verifyprof.cli.app import app
from verifyprof.cli.capture_options import (
    AcceptLenConventionOpt,
    AgainOpt,
    AllowMissingHooksOpt,
    BackendOpt,
    BaselineRepeatOpt,
    BaselineRunOpt,
    BatchesOpt,
    CaptureAllOpt,
    ConcurrencyOpt,
    ContextsOpt,
    DeadlineOpt,
    DecodeCmdOpt,
    GzipOpt,
    HealthTimeoutOpt,
    HookOpt,
    HooksOpt,
    HooksProgramOpt,
    InputLenOpt,
    NumDraftsOpt,
    NumStepsOpt,
    OsrtOpt,
    OutOpt,
    OutputLenOpt,
    PortOpt,
    ProgramContextOpt,
    ProgramOpt,
    PromptsOpt,
    RequestsOpt,
    RequestTimeoutOpt,
    ResultOpt,
    ServerCmdOpt,
    SpecOpt,
    StopTimeoutOpt,
    TemperatureOpt,
    UnprofiledRequestsOpt,
    WarmupOpt,
)
from verifyprof.cli.option_aliases import JsonOpt


@app.command(context_settings={"allow_interspersed_args": False})
def capture(
    ctx: typer.Context,
    program: ProgramOpt = None,
    server_cmd: ServerCmdOpt = None,
    port: PortOpt = None,
    out: OutOpt = None,
    backend: BackendOpt = "nsys",
    requests: RequestsOpt = 16,
    concurrency: ConcurrencyOpt = "1",
    input_len: InputLenOpt = None,
    output_len: OutputLenOpt = 256,
    prompts: PromptsOpt = None,
    warmup: WarmupOpt = 2,
    temperature: TemperatureOpt = 0.0,
    health_timeout: HealthTimeoutOpt = 600.0,
    request_timeout: RequestTimeoutOpt = 300.0,
    deadline: DeadlineOpt = 3600.0,
    hooks: HooksOpt = None,
    hook: HookOpt = None,
    num_steps: NumStepsOpt = None,
    osrt: OsrtOpt = False,
    capture_all: CaptureAllOpt = False,
    gzip: GzipOpt = False,
    stop_timeout: StopTimeoutOpt = 60.0,
    allow_missing_hooks: AllowMissingHooksOpt = False,
    baseline_run: BaselineRunOpt = False,
    baseline_repeat: BaselineRepeatOpt = 1,
    unprofiled_requests: UnprofiledRequestsOpt = None,
    decode_cmd: DecodeCmdOpt = None,
    accept_len_convention: AcceptLenConventionOpt = None,
    batches: BatchesOpt = None,
    num_drafts: NumDraftsOpt = None,
    contexts: ContextsOpt = None,
    program_context: ProgramContextOpt = None,
    result: ResultOpt = None,
    again: AgainOpt = None,  # expanded before parsing (cli/again.py): listed for --help
) -> None:
    """Run a server (or program) under nsys with verifyprof's NVTX hooks, drive a workload, and
    write the trace plus manifest.json (accept length, tok/s, versions) for breakdown/whatif."""
    from verifyprof.pipeline.capturing import CaptureOptions, parse_result_specs

    out = _names(out, prompts)
    if server_cmd is None:
        _refuse_server_options(ctx)
    loads = _loads(concurrency)
    options = CaptureOptions(
        out=out,
        server_cmd=server_cmd,
        program=list(program or []),
        backend=backend,
        port=port,
        requests=requests,
        concurrency=max(loads),
        loads=loads if len(loads) > 1 else (),
        input_len=input_len,
        output_len=output_len,
        prompts=prompts,
        warmup=warmup,
        temperature=temperature,
        health_timeout=health_timeout,
        request_timeout=request_timeout,
        deadline=deadline,
        hooks=None if hooks is None else [h.strip() for h in hooks.split(",")],
        hook_targets=list(hook or []),
        num_steps=num_steps,
        osrt=osrt,
        capture_all=capture_all,
        gzip=gzip,
        stop_timeout=stop_timeout,
        allow_missing_hooks=allow_missing_hooks,
        baseline_run=baseline_run,
        baseline_repeat=baseline_repeat,
        unprofiled_requests=unprofiled_requests,
        accept_len_convention=accept_len_convention,
        decode_cmd=decode_cmd,
        argv=list(sys.argv),
        results=parse_result_specs(result or []),
    )
    _run(options, (batches, num_drafts, contexts), program_context)


def _names(out: Path | None, prompts: Path | None) -> Path:
    """``--out`` (default: verifyprof-capture-<time>) and ``--prompts`` as
    :func:`~verifyprof.contracts.plumbing.paths.user_path` takes them, --prompts a file that
    can be read (a FIFO would block, a device never end); a deleted working directory, where
    the program would run, is one line."""

    from verifyprof.contracts.errors import VerifyprofError
    from verifyprof.contracts.plumbing.inputs import check_file_option
    from verifyprof.contracts.plumbing.paths import user_path, working_directory

    if working_directory() is None:
        raise VerifyprofError(
            "capture: the working directory no longer exists (deleted), and the program would"
            " run in it: cd to a folder that exists"
        )
    if prompts is not None:
        check_file_option(user_path(prompts, "--prompts"), "--prompts")
    out = out or Path(f"verifyprof-capture-{time.strftime('%Y%m%d-%H%M%S')}")
    return user_path(out, "--out")


# The options of a server capture's workload: a program (after --) runs its own, so there they
# would mean nothing and are refused rather than silently ignored.
SERVER_ONLY = (
    "port",
    "requests",
    "concurrency",
    "input_len",
    "output_len",
    "prompts",
    "warmup",
    "temperature",
    "health_timeout",
    "request_timeout",
    "deadline",
    "unprofiled_requests",
)


def _run(options, lists: tuple[str | None, ...], context: int | None) -> None:
    """One capture, or one per load of a program (``--batches``, ``--num-drafts``,
    ``--contexts``: every combination); ``--program-context`` recorded in each manifest. Each
    capture is summarised as it finishes: a sweep stopped later still shows what it captured."""
    from dataclasses import replace

    from verifyprof.contracts.plumbing.text import safe_text
    from verifyprof.pipeline.capturing import (
        capture,
        capture_loads,
        load_record,
        parse_values,
        summary_lines,
    )

    def show(result) -> None:
        for line in summary_lines(result):  # names in it escaped, as in errors
            print(safe_text(" ".join(line.split()) if "\n" in line else line, keep="\t"))

    def stopped(line: str) -> None:
        print(f"verifyprof: {safe_text(line)}", file=sys.stderr)

    given = zip(("batch", "num_draft", "context"), lists)  # --batches, --num-drafts, --contexts
    sweep = {name: text for name, text in given if text is not None}
    if not sweep:
        return show(capture(replace(options, load=load_record(options, {}, context))))
    options_of = {"batch": "--batches", "num_draft": "--num-drafts", "context": "--contexts"}
    values = {name: parse_values(text, options_of[name]) for name, text in sweep.items()}
    capture_loads(options, values, capture, context, on_done=show, on_stop=stopped)


def _loads(text: str) -> tuple[int, ...]:
    """``--concurrency 8`` or ``1,8,32`` (distinct; each checked with the other numbers)."""

    from verifyprof.contracts.errors import VerifyprofError

    try:
        values = tuple(int(v) for v in str(text).split(","))
    except ValueError:
        raise VerifyprofError(
            f"--concurrency: a number or a comma-separated list of numbers, got {text!r:.60}"
        ) from None
    if len(set(values)) != len(values):
        raise VerifyprofError(f"--concurrency {text}: each load once")
    return values


def _refuse_server_options(ctx: typer.Context) -> None:

    from verifyprof.contracts.errors import VerifyprofError

    given = [
        next(p.opts[0] for p in ctx.command.params if p.name == name)
        for name in SERVER_ONLY
        if getattr(ctx.get_parameter_source(name), "name", "DEFAULT") != "DEFAULT"
    ]
    if given:
        raise VerifyprofError(
            f"{', '.join(given)}: {'options' if len(given) > 1 else 'an option'} of a server"
            " capture (--server-cmd); a program (after --) runs its own workload, so"
            f" {'they mean' if len(given) > 1 else 'it means'} nothing here: drop"
            f" {'them' if len(given) > 1 else 'it'}"
        )


@app.command()
def hooks(
    spec: SpecOpt = "sglang",
    program: HooksProgramOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Which hook targets exist in the installed packages (and the program's own folder, default
    the current one): run before a capture to see what will be wrapped.

    Exit 1 when a target cannot be hooked in this Python: missing (a target you named whose
    function, module or package is not there, or one in the program's __main__) or unsupported
    (not a plain function). Exit 0 otherwise: a preset's targets this Python lacks (absent: a
    name of another version; not checked: the server is not installed here) are information.
    Exit 2: bad input."""
    import warnings

    from verifyprof.contracts.errors import VerifyprofError
    from verifyprof.contracts.plumbing.paths import working_directory
    from verifyprof.pipeline.capturing import hook_api, is_main_module, program_folder
    from verifyprof.report import hooks_console

    cwd = working_directory()  # None: deleted; the installed packages are still looked in
    if program and cwd is None:
        raise VerifyprofError(
            "hooks --program: the working directory no longer exists (deleted), and the"
            " program's folder is found from it: cd to a folder that exists"
        )
    folder = program_folder(program) if program else None
    is_main = (lambda module: is_main_module(module, program)) if program else None
    with (
        warnings.catch_warnings()
    ):  # each HookWarning is a row of the report below, not a stderr line with source
        warnings.simplefilter("ignore", hook_api.HookWarning)
        statuses = hook_api.check(
            spec, path=[str(p) for p in (folder, cwd) if p is not None], is_main=is_main
        )
    if as_json:
        from verifyprof.report import files  # pandas: only for the JSON

        files.print_json([s.to_json() for s in statuses])
    else:
        hooks_console.print_hooks(spec, statuses, program=bool(program))
    if hook_api.cannot_hook(statuses):
        raise typer.Exit(1)
