"""What the command functions share: one-line usage errors, step selection by phase, the
parallel-map options and hints for inputs. Parsing helpers only."""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import typer
from typer.core import TyperGroup

from verifyprof.cli.again import expanded
from verifyprof.contracts.errors import (
    EXIT_BAD_INPUT,
    EXIT_CLOSED_PIPE,
    OutputClosed,
    ToolMissingError,
    VerifyprofError,
    path_error,
)
from verifyprof.contracts.plumbing.outputs import silence_stdout
from verifyprof.contracts.plumbing.paths import working_directory
from verifyprof.contracts.plumbing.text import safe_lines, safe_text

_BOOL_WORDS = ("true", "false", "yes", "no", "on", "off", "1", "0")
# click's classes, wherever this typer keeps them (click itself, or typer's vendored copy)
UsageError = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
NoArgsIsHelpError = getattr(
    sys.modules[UsageError.__module__],
    "NoArgsIsHelpError",
    type("NoArgsIsHelpError", (Exception,), {}),
)
# --help wraps between words only: click's wrapper also breaks at hyphens, which cut a name in
# two (verifyprof-\ncapture-<time>, batch-\nN_k-N) where it is meant to be read or copied whole.
# Each wrapper sets break_on_hyphens itself, so the pattern it then splits with is replaced.
_textwrap = importlib.import_module(UsageError.__module__.rsplit(".", 1)[0] + "._textwrap")
_textwrap.TextWrapper.wordsep_re = _textwrap.TextWrapper.wordsep_simple_re


class _Group(TyperGroup):
    """Errors as one line: ``verifyprof: error: ...`` on stderr, exit 2, no boxed panel or
    traceback."""

    def invoke(self, ctx):  # type: ignore[no-untyped-def]
        """A table written to a closed pipe is the same quiet stop as JSON (click would exit 1)."""
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            silence_stdout()
            raise OutputClosed("standard output closed") from None
        except KeyboardInterrupt as err:  # typer would make every one a silent Exit(130)
            raise Interrupted(getattr(err, "signum", signal.SIGINT)) from None

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            args = expanded(self, list(sys.argv[1:] if args is None else args), args is None)
            _check_repeats(self, args)
            code = super().main(
                args=args,
                prog_name=prog_name or "verifyprof",
                complete_var=complete_var,
                standalone_mode=False,
                **extra,
            )
            if code == 130:  # typer turns a Ctrl-C while parsing into a silent Exit(130)
                code = interrupted()
        except NoArgsIsHelpError as err:
            print(err.format_message(), file=sys.stderr)
            code = 2
        except UsageError as err:
            print(
                "verifyprof: error:"
                f" {safe_text(_usage_message(err, list(sys.argv[1:] if args is None else args)))}",
                file=sys.stderr,
            )
            code = 2
        except typer.Abort:
            code = interrupted()
        except Interrupted as err:  # Ctrl-C, or a stop signal capture turned into one
            code = interrupted(err.signum)
        except OutputClosed as err:  # the reader of a pipe went away (| head): quiet
            code = err.exit_code
        except BrokenPipeError:  # a table's write to a closed pipe
            silence_stdout()
            code = EXIT_CLOSED_PIPE
        except VerifyprofError as err:
            # its own line breaks kept (a log's tail), every other control character escaped
            print(f"verifyprof: error: {safe_lines(str(err))}", file=sys.stderr)
            code = err.exit_code
        except OSError as err:
            if err.filename is None and working_directory() is not None:
                raise
            # a path that cannot be read, searched or named, wherever it was met: one line
            print(f"verifyprof: error: {safe_text(_os_error_line(err))}", file=sys.stderr)
            code = EXIT_BAD_INPUT
        code = code if isinstance(code, int) else 0
        if standalone_mode:
            sys.exit(code)
        return code


def _os_error_line(err: OSError) -> str:
    """An OSError's one line: the path's problem, or (no path: ``os.getcwd()`` met on the way,
    after every name the user gave was checked) the deleted working directory."""
    if err.filename is None:
        return "the working directory no longer exists (deleted): cd to a folder that exists"
    return str(path_error(err))


def _check_repeats(group: TyperGroup, argv: list[str]) -> None:
    """An option taking one value given twice (click keeps the last: ``-o a -o b`` wrote b
    alone), or a path option given an empty path (``-o ''`` is Path('.'), 'a directory'): one
    line, before any parsing. The program's own arguments after ``--`` are not looked at."""
    name = next((a for a in argv if not a.startswith("-")), None)
    command = group.commands.get(name) if name else None
    if command is None:
        return
    options = {
        opt: p
        for p in command.params
        if p.param_type_name == "option" and not (p.is_flag or p.multiple or p.count)
        for opt in p.opts + p.secondary_opts
    }
    seen: dict[str, tuple[str, str | None]] = {}  # name -> (option as spelled, its value)
    rest, i = argv[argv.index(name) + 1 :], 0
    while i < len(rest) and rest[i] != "--":
        opt, eq, value = rest[i].partition("=")
        param = options.get(opt) if opt.startswith("-") else None
        i += 1
        if param is None:
            continue
        if not eq:  # the value is the next word (skipped: it may look like an option)
            value, i = (rest[i] if i < len(rest) else None), i + 1
        if value == "" and _takes_path(param):
            raise VerifyprofError(f"{name}: {opt}: an empty path (give a file name)")
        if param.name in seen:
            first, was = seen[param.name]
            raise VerifyprofError(
                f"{name}: {first} given twice ({was!r}, then {value!r}): give it once"
            )
        seen[param.name] = (opt, value)


def _takes_path(param: Any) -> bool:
    """Whether an option's value is a path (typer's own click keeps the annotation; click's, the
    type)."""
    described = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    return described is Path or type(getattr(param, "type", None)).__name__ in ("Path", "TyperPath")


class Interrupted(Exception):
    """Ctrl-C or a stop signal (``signum``) ended a command: exit 128 + ``signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)


def interrupted(signum: int = signal.SIGINT) -> int:
    """Say so in one line, and the exit code (128 + the signal, as a shell reports a process
    the signal ended); a further Ctrl-C while saying it is ignored."""
    previous = None
    with contextlib.suppress(ValueError):  # not the main thread
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    how = "" if signum == signal.SIGINT else f" ({signal.Signals(signum).name})"
    with contextlib.suppress(OSError, ValueError):
        print(f"verifyprof: interrupted{how}", file=sys.stderr)
    if previous is not None:
        signal.signal(signal.SIGINT, previous)
    return 128 + int(signum)


def _usage_message(err: Exception, argv: list[str]) -> str:
    message = " ".join(err.format_message().split())  # type: ignore[attr-defined]
    ctx = getattr(err, "ctx", None)
    command = ctx.command_path if ctx is not None else "verifyprof"
    extra = [a for a in argv if a.lower() in _BOOL_WORDS]
    if "unexpected extra argument" in message and extra:
        message += f" (flags such as --json take no value: give '--json', not '--json {extra[0]}')"
    return f"{command}: {message} (see {command} --help)"


def _refuse_picks(width: int | None, mode: str | None, scope: str | None) -> None:
    """``--width`` / ``--mode`` pick the verdict's step group: with ``scope`` (``--whole-trace``,
    kernels' ``--all`` or ``--range``), where they would change nothing, one line."""
    picks = [o for o, on in (("--width", width), ("--mode", mode)) if on is not None]
    if picks and scope:
        raise VerifyprofError(
            f"{' and '.join(picks)} {'pick' if len(picks) > 1 else 'picks'} the verdict's step"
            f" group: not with {scope}"
        )


def _check_run(**parts: Any) -> Any:
    """A command's inputs, file options, numbers and outputs, checked before any work (issue 22):
    :func:`verifyprof.pipeline.command_checks.check_run`, imported only when a command runs."""
    from verifyprof.pipeline.command_checks import check_run

    return check_run(**parts)


def _wrote(path: Path, size: str = "", stream: Any = None) -> None:
    """``wrote NAME``, the name escaped as error messages escape it (a newline, an ESC, a byte
    that is not UTF-8), ``size`` after it; on standard error unless ``stream``."""
    print(f"wrote {safe_text(str(path))}{size}", file=stream or sys.stderr)


@contextlib.contextmanager
def _nsys_hint(trace: str) -> Iterator[None]:
    """A .nsys-rep without nsys: the error names the SQLite export beside it."""
    try:
        yield
    except ToolMissingError as err:
        rep = err.path or Path(trace)
        beside = sorted(
            p.name for p in rep.parent.glob("*") if p.name.endswith((".sqlite", ".sqlite.gz"))
        )
        if beside:
            raise ToolMissingError(
                f"{err.problem}; or give the SQLite export beside it: {rep.parent / beside[0]}", rep
            ) from None
        raise


def _parallel(
    workers: Optional[int],
    scheduler: Optional[str],
    strict: bool,
    shown,
    read_ahead: Optional[list[str]] = None,
):
    """The CLI's map: failed files as warning lines; ``shown`` (the status line) counts the files
    mapped and is paused while workers fork. ``read_ahead``: a breakdown's traces, whose big read
    (one nsys export's) starts first, to run beside the imports of the map and the analysis."""
    from verifyprof import pipeline

    _numpy_with_one_blas_thread()
    if read_ahead is not None:
        pipeline.start_read_ahead(read_ahead, workers, scheduler)
    from verifyprof.pipeline import ParallelOptions

    warn = lambda failure: print(
        f"verifyprof: warning: {safe_text(f'{failure.path}: {failure.reason}')} (file skipped)",
        file=sys.stderr,
    )
    return ParallelOptions(
        workers=workers,
        scheduler=scheduler,
        strict=strict,
        report=warn,
        own_process=True,
        pause=shown.paused,
        progress=shown.count,
    )  # both do nothing where no line is drawn


def _numpy_with_one_blas_thread() -> None:
    """numpy loaded with its BLAS on the calling thread alone: OpenBLAS otherwise starts a thread
    per CPU as numpy loads, each spinning ~0.1 s for work the analysis never gives it (no matrix
    is large enough to split), beside the read-ahead and the imports (~0.1 CPU-s on 2 CPUs, ~1.5
    on 16). This process's alone: the variable is gone once numpy has loaded, so no program the
    CLI starts sees it; one the user set is left as it is."""
    if "numpy" in sys.modules or "OPENBLAS_NUM_THREADS" in os.environ:
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]


def _check_manifest(path: Path) -> None:
    """A breakdown, whatif or kernels JSON, or a trace, given to --manifest: say so, not 'accept
    length unknown'."""
    try:
        with path.open("rb") as handle:
            head = handle.read(4096)
    except OSError:
        return  # the manifest reader names the problem
    if head[:2] == b"\x1f\x8b" or b'"traceEvents"' in head or head.startswith(b"SQLite format 3"):
        raise VerifyprofError("not a capture manifest: this is a trace (give it to --from)", path)
    for kind in (b"breakdown", b"whatif", b"kernels"):
        if b'"verifyprof.' + kind + b"/" in head:
            hint = "; give it to --from" if kind == b"breakdown" else ""
            raise VerifyprofError(
                f"not a capture manifest: this is a {kind.decode()} JSON (schema"
                f" verifyprof.{kind.decode()}/1){hint}",
                path,
            )
