"""What a capture was asked to do, and the checks that reject a bad request before anything starts
(minutes of model loading are too high a price for a typo)."""

from __future__ import annotations

import math
import os
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from verifyprof.capture import driver
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.manifest import ACCEPT_CONVENTIONS

BACKENDS = ("nsys", "torch", "none")
DEFAULT_PORT = 30000  # SGLang's
MAX_BASELINE_REPEAT = 20  # unprofiled runs of the program: each costs a whole run


@dataclass
class CaptureOptions:
    out: Path
    server_cmd: str | None = None
    program: list[str] = field(default_factory=list)
    backend: str = "nsys"
    port: int | None = None
    requests: int = 16
    concurrency: int = 1
    # several loads in one window (``--concurrency 1,8,32``): each driven in turn, its window and
    # rates recorded in the manifest's ``loads``; empty: one load (``concurrency``)
    loads: tuple[int, ...] = ()
    input_len: int | None = None
    output_len: int = 256
    prompts: Path | None = None
    warmup: int = 2
    temperature: float = 0.0
    health_timeout: float = 600.0
    request_timeout: float = 300.0  # one request unanswered this long: the server is hung
    deadline: float = 3600.0  # the whole workload, from the server's health on
    hooks: list[str] | None = (
        None  # None: the mode's default (sglang for a server, none for a program)
    )
    hook_targets: list[str] = field(default_factory=list)
    num_steps: int | None = None
    osrt: bool = False
    capture_all: bool = False
    gzip: bool = (
        False  # nsys: keep the SQLite export gzipped (capture.sqlite.gz), as committed traces are
    )
    stop_timeout: float = 60.0
    report_timeout: float = 900.0
    trace_wait: float = 120.0
    allow_missing_hooks: bool = False  # exit 0 even when hooks were asked for and none fired
    baseline_run: bool = (
        False  # program: run it once with no profiler and no hooks first (dilation)
    )
    baseline_repeat: int = 1  # --baseline-run this many times; the median rate is the anchor
    unprofiled_requests: int | None = (
        None  # server: requests after the window (None: a default, 0: none)
    )
    decode_cmd: str | None = None  # program: a plain-decoding run of it, for the baseline rate
    accept_len_convention: str | None = (
        None  # program's accept_len: tokens_per_verify | accepted_drafts
    )
    argv: list[str] = field(default_factory=list)  # verifyprof's own command line, for the manifest
    # what the capture knows of its load (``--batches`` ... ``--program-context``): the manifest's
    # ``load`` record (:mod:`verifyprof.capture.load_axes`), None where it knows nothing
    load: dict | None = None
    # --result NAME=REGEX: numbers read from the program's printed output (capture/log_results.py)
    results: tuple[tuple[str, str], ...] = ()

    @property
    def mode(self) -> str:
        return "server" if self.server_cmd is not None else "program"


# Seconds options: (flag, attribute, smallest allowed, zero allowed). NaN and infinity never are:
# a NaN deadline never passes, so a NaN timeout is a hang.
_SECONDS = (
    ("--health-timeout", "health_timeout", False),
    ("--stop-timeout", "stop_timeout", True),
    ("--request-timeout", "request_timeout", False),
    ("--deadline", "deadline", False),
    ("--report-timeout", "report_timeout", False),
    ("--trace-wait", "trace_wait", False),
)
MAX_SECONDS = 7 * 24 * 3600.0  # a week: anything longer is a typo, not a timeout


def validate(opts: CaptureOptions) -> None:
    """Every check that can be made before anything starts, each a one-line VerifyprofError."""
    if (opts.server_cmd is None) == (not opts.program):
        raise VerifyprofError(
            'give either --server-cmd "..." or a program after --, not both or neither'
        )
    if opts.backend not in BACKENDS:
        raise VerifyprofError(
            f"--backend must be one of {', '.join(BACKENDS)}, not {opts.backend!r}"
        )
    if opts.mode == "program" and opts.backend == "torch":
        raise VerifyprofError(
            "--backend torch needs --server-cmd (SGLang writes its own torch-profiler traces); "
            "for a program use nsys, or --backend none if it runs torch.profiler itself"
        )
    _check_numbers(opts)
    if opts.mode == "server":
        argv = split_server_cmd(opts.server_cmd or "")
        check_executable(argv[0], "--server-cmd")
        server_address(argv, opts.port)  # the --port in the command: a number, in range, agreeing
        # the same checks the driver makes, but before minutes of model loading, not after;
        # each load of a list (--concurrency 8,0), not only the largest
        workloads(opts)
    else:
        check_executable(opts.program[0], "the program")
    check_out_dir(opts.out)


def _check_numbers(opts: CaptureOptions) -> None:
    for flag, name, zero_ok in _SECONDS:
        value = getattr(opts, name)
        if (
            not (isinstance(value, (int, float)) and math.isfinite(value))
            or value < 0
            or (value == 0 and not zero_ok)
        ):
            raise VerifyprofError(
                f"{flag} must be a finite number of seconds {'>= 0' if zero_ok else '> 0'}, not"
                f" {value!r}"
            )
        if value > MAX_SECONDS:
            raise VerifyprofError(f"{flag} {value:g} s is more than a week: give a real timeout")
    if not math.isfinite(opts.temperature) or opts.temperature < 0:
        raise VerifyprofError(
            f"--temperature must be a finite number >= 0, not {opts.temperature!r}"
        )
    if opts.port is not None:
        check_port(opts.port, "--port")
    if opts.num_steps is not None and opts.num_steps < 1:
        raise VerifyprofError("--num-steps must be at least 1")
    if opts.warmup < 0:
        raise VerifyprofError("--warmup must be 0 or more")
    if opts.unprofiled_requests is not None and opts.unprofiled_requests < 0:
        raise VerifyprofError("--unprofiled-requests must be 0 or more")
    if (
        opts.accept_len_convention is not None
        and opts.accept_len_convention not in ACCEPT_CONVENTIONS
    ):
        raise VerifyprofError(
            f"--accept-len-convention must be one of {', '.join(ACCEPT_CONVENTIONS)}, "
            f"not {opts.accept_len_convention!r}"
        )
    if opts.decode_cmd is not None and (opts.mode != "program" or not opts.decode_cmd.strip()):
        raise VerifyprofError(
            "--decode-cmd is a command line for a program capture (-- cmd ...): the same"
            " program with speculation off"
        )
    if not 1 <= opts.baseline_repeat <= MAX_BASELINE_REPEAT:
        raise VerifyprofError(
            f"--baseline-repeat must be 1 to {MAX_BASELINE_REPEAT}, got {opts.baseline_repeat}"
        )
    if opts.baseline_repeat > 1 and not opts.baseline_run:
        raise VerifyprofError("--baseline-repeat repeats --baseline-run: give both")
    if opts.results and opts.mode != "program":
        raise VerifyprofError("--result reads a program's printed output: give a program (-- cmd)")
    if opts.baseline_run and opts.mode != "program":
        raise VerifyprofError(
            "--baseline-run is for a program (-- cmd ...); a server's unprofiled rate comes "
            "from --unprofiled-requests after the window"
        )


def check_port(port: int, what: str) -> int:
    if not 1 <= port <= 65535:
        raise VerifyprofError(f"{what} must be a TCP port, 1 to 65535, not {port}")
    return port


def split_server_cmd(text: str) -> list[str]:
    try:
        argv = shlex.split(text)
    except ValueError as err:  # "No closing quotation", "No escaped character"
        raise VerifyprofError(
            f"--server-cmd cannot be split into arguments: {err} in {text!r}"
        ) from None
    if not argv:
        raise VerifyprofError("--server-cmd is empty")
    return argv


def check_executable(command: str, what: str) -> None:
    """``command`` can be started: an executable file (a path), or found on the PATH."""
    if os.sep in command:
        path = Path(command)
        if not path.exists():
            raise VerifyprofError(f"{what}: no such file", path)
        if not path.is_file() or not os.access(path, os.X_OK):
            raise VerifyprofError(f"{what}: not an executable file", path)
        try:
            with path.open("rb") as handle:
                head = handle.read(4)
        except OSError as err:
            raise VerifyprofError(f"{what}: cannot read: {err.strerror}", path) from None
        if not head.startswith((b"#!", b"\x7fELF")):
            raise VerifyprofError(
                f"{what}: not a program (neither an ELF binary nor a script starting with #!)", path
            )
    elif shutil.which(command) is None:
        raise VerifyprofError(f"{what}: command {command!r} not found on the PATH")


def check_out_dir(out: Path) -> Path:
    """A new (or empty) directory that can be made: every existing ancestor a writable folder."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise VerifyprofError(
            "output directory exists and is not empty: captures are never overwritten; pass a new"
            " --out",
            out,
        )
    ancestor = out if out.exists() else out.parent
    for folder in (out, *out.parents):  # mkdir would say only "File exists"
        if folder.exists():
            break
        if folder.is_symlink():
            raise VerifyprofError(
                f"cannot make the output directory: {folder} is a symbolic link to"
                f" {os.readlink(folder)}, which does not exist",
                out,
            )
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise VerifyprofError(
            f"cannot make the output directory: {ancestor} is not a directory", out
        )
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise VerifyprofError(f"cannot make the output directory: {ancestor} is not writable", out)
    return out


def _option_value(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def server_address(argv: list[str], port: int | None) -> tuple[list[str], str, int]:
    """(server argv, host to connect to, port): ``--port`` comes from the server command, or is
    added to it from ours; both given and different is an error."""
    cmd_port_text = _option_value(argv, "--port")
    cmd_port = None
    if cmd_port_text is not None:
        try:
            cmd_port = check_port(int(cmd_port_text), "--port in --server-cmd")
        except ValueError as err:
            raise VerifyprofError(
                f"--server-cmd has --port {cmd_port_text!r}, not a number"
            ) from err
    if port is not None and cmd_port is not None and port != cmd_port:
        raise VerifyprofError(
            f"--port {port} disagrees with --port {cmd_port} in --server-cmd: give one"
        )
    if port is not None and cmd_port is None:
        argv = [*argv, "--port", str(port)]
    host = _option_value(argv, "--host") or "127.0.0.1"
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    return argv, host, port or cmd_port or DEFAULT_PORT


def workloads(opts: CaptureOptions) -> list[driver.Workload]:
    """The workload of each load a server capture drives (``--concurrency 1,8,32``: three), in
    order; each made (so checked) before anything starts, by :func:`validate`."""
    return [
        driver.Workload(
            opts.requests,
            concurrency,
            opts.output_len,
            opts.input_len,
            opts.temperature,
            opts.request_timeout,
        )
        for concurrency in opts.loads or (opts.concurrency,)
    ]
