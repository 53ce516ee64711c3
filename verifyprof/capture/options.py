"""What a capture was asked to do, and the checks that reject a bad request before anything starts
(minutes of model loading are too high a price for a typo)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from verifyprof.capture import driver
from verifyprof.contracts.errors import VerifyprofError

BACKENDS = ("nsys", "torch", "none")
DEFAULT_PORT = 30000  # SGLang's


@dataclass
class CaptureOptions:
    out: Path
    server_cmd: str | None = None
    program: list[str] = field(default_factory=list)
    backend: str = "nsys"
    port: int | None = None
    requests: int = 16
    concurrency: int = 1
    input_len: int | None = None
    output_len: int = 256
    prompts: Path | None = None
    warmup: int = 2
    temperature: float = 0.0
    health_timeout: float = 600.0
    request_timeout: float = 600.0
    hooks: list[str] | None = None  # None: the mode's default (sglang for a server, none for a program)
    hook_targets: list[str] = field(default_factory=list)
    num_steps: int | None = None
    osrt: bool = False
    capture_all: bool = False
    gzip: bool = False  # nsys: keep the SQLite export gzipped (capture.sqlite.gz), as committed traces are
    stop_timeout: float = 60.0
    report_timeout: float = 900.0
    trace_wait: float = 120.0
    argv: list[str] = field(default_factory=list)  # verifyprof's own command line, for the manifest

    @property
    def mode(self) -> str:
        return "server" if self.server_cmd is not None else "program"


def validate(opts: CaptureOptions) -> None:
    if (opts.server_cmd is None) == (not opts.program):
        raise VerifyprofError("give either --server-cmd \"...\" or a program after --, not both or neither")
    if opts.backend not in BACKENDS:
        raise VerifyprofError(f"--backend must be one of {', '.join(BACKENDS)}, not {opts.backend!r}")
    if opts.mode == "program" and opts.backend == "torch":
        raise VerifyprofError(
            "--backend torch needs --server-cmd (SGLang writes its own torch-profiler traces); "
            "for a program use nsys, or --backend none if it runs torch.profiler itself"
        )
    if opts.server_cmd is not None and not shlex.split(opts.server_cmd):
        raise VerifyprofError("--server-cmd is empty")
    if opts.mode == "server":
        # the same checks the driver makes, but before minutes of model loading, not after
        driver.Workload(opts.requests, opts.concurrency, opts.output_len, opts.input_len, opts.temperature, opts.request_timeout)
    if opts.num_steps is not None and opts.num_steps < 1:
        raise VerifyprofError("--num-steps must be at least 1")
    if opts.warmup < 0:
        raise VerifyprofError("--warmup must be 0 or more")
    if opts.health_timeout <= 0:
        raise VerifyprofError("--health-timeout must be positive")


def check_out_dir(out: Path) -> Path:
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise VerifyprofError("output directory exists and is not empty: captures are never overwritten; pass a new --out", out)
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
            cmd_port = int(cmd_port_text)
        except ValueError as err:
            raise VerifyprofError(f"--server-cmd has --port {cmd_port_text!r}, not a number") from err
    if port is not None and cmd_port is not None and port != cmd_port:
        raise VerifyprofError(f"--port {port} disagrees with --port {cmd_port} in --server-cmd: give one")
    if port is not None and cmd_port is None:
        argv = [*argv, "--port", str(port)]
    host = _option_value(argv, "--host") or "127.0.0.1"
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    return argv, host, port or cmd_port or DEFAULT_PORT
