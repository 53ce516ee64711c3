"""The capture flow: start the target (under nsys, with the NVTX hooks injected), drive it, stop
everything, and leave the trace and ``manifest.json`` in the output directory.

Whatever happens (Ctrl-C, SIGTERM, a server that dies, a health timeout) the target and every
process it started are stopped, what was captured is kept and listed in the manifest, and the
error says what happened in one line (plus the server log's tail where that is the evidence).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from verifyprof.capture import driver, manifest, nsys
from verifyprof.capture.server import (
    LOG_TAIL_LINES,
    CaptureError,
    ManagedProcess,
    StopReport,
    check_port_free,
    http_get,
    wait_healthy,
    with_log_tail,
)
from verifyprof.errors import VerifyprofError

BACKENDS = ("nsys", "torch", "none")
DEFAULT_PORT = 30000  # SGLang's
DEFAULT_SERVER_HOOKS = ("sglang",)
TORCH_TRACE_DIR = "torch"
PROGRAM_RESULTS = "results.json"  # a program may write its own numbers here (see program_results)


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


@dataclass
class CaptureResult:
    out: Path
    manifest: dict

    @property
    def manifest_path(self) -> Path:
        return self.out / manifest.MANIFEST


# ------------------------------------------------------------------------------------------
# validation and setup (nothing is started until all of it passed)


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


def check_out_dir(out: Path) -> Path:
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise VerifyprofError("output directory exists and is not empty: captures are never overwritten; pass a new --out", out)
    return out


def hook_presets(opts: CaptureOptions) -> list[str]:
    presets = list(DEFAULT_SERVER_HOOKS if opts.mode == "server" else ()) if opts.hooks is None else list(opts.hooks)
    return [p for p in presets if p and p != "none"]


def hooks_env(presets: list[str], targets: list[str], report_dir: Path) -> dict[str, str]:
    """The environment that makes the target (and its spawned TP processes) load the hooks; each
    process reports what it patched into ``report_dir``."""
    if not presets and not targets:
        return {}
    from verifyprof.capture.hooks import injection_env

    return dict(injection_env(presets, targets, report_dir=report_dir, environ=os.environ))


def hook_reports(report_dir: Path) -> list[dict]:
    """Per process that installed hooks: how many targets it patched, and which it could not find."""
    import json

    rows = []
    for path in sorted(report_dir.glob("hooks-*.json")) if report_dir.is_dir() else []:
        try:
            report = json.loads(path.read_text())
            states: dict[str, list[str]] = {}
            for hook in report.get("hooks", []):
                states.setdefault(hook.get("state", "?"), []).append(hook.get("target", "?"))
        except (OSError, ValueError, AttributeError):
            continue
        rows.append({
            "pid": report.get("pid"), "argv": report.get("argv"),
            "patched": len(states.get("patched", [])), "pending": len(states.get("pending", [])),
            "missing": states.get("missing", []) + states.get("unsupported", []),
        })
    return rows


def program_results(out: Path) -> dict:
    """What a program reported about itself: ``$VERIFYPROF_CAPTURE_DIR/results.json`` (a JSON
    object, e.g. ``{"accept_len": 2.1, "tokens_per_s": 95.0, "baseline_tokens_per_s": 60.0}``),
    which becomes the manifest's ``results``; empty when it wrote none or not an object."""
    import json

    path = out / PROGRAM_RESULTS
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


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


def profile_body(backend: str, out: Path, num_steps: int | None) -> dict:
    """The ``/start_profile`` request (SGLang ``ProfileReq``, fields every version since 0.4 takes)."""
    if backend == "nsys":
        body: dict = {"activities": ["CUDA_PROFILER"]}
    else:
        body = {"activities": ["CPU", "GPU"], "output_dir": str((out / TORCH_TRACE_DIR).resolve()), "with_stack": False, "record_shapes": False}
    if num_steps is not None:
        body["num_steps"] = num_steps
    return body


# ------------------------------------------------------------------------------------------
# signals


class Terminated(KeyboardInterrupt):
    """SIGTERM to verifyprof: handled like Ctrl-C, so a job scheduler's kill also cleans up."""


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _hurry_on_interrupt(console: Console) -> Iterator[threading.Event]:
    """During cleanup a further Ctrl-C must not abandon the server: it only escalates faster."""
    hurry = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield hurry
        return

    def handler(signum: int, frame: object) -> None:
        if not hurry.is_set():
            console.print("[yellow]verifyprof: stopping harder (SIGTERM, then SIGKILL)[/]")
        hurry.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield hurry
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


# ------------------------------------------------------------------------------------------
# the flow


class _Run:
    """One capture: state shared by the steps, so the cleanup knows what got done."""

    def __init__(self, opts: CaptureOptions, console: Console) -> None:
        self.opts = opts
        self.console = console
        self.out = check_out_dir(opts.out)
        self._versions: dict = {}
        self.nsys: Path | None = None
        self.nsys_version: str | None = None
        self.proc: ManagedProcess | None = None
        self.results: list[driver.RequestResult] = []
        self.summary: dict = {}
        self.window: dict = {}
        self.profiling = False
        self.server_version: str | None = None
        self.status = "running"
        self.error: str | None = None
        self.stop_report: StopReport | None = None
        self.exit_code: int | None = None
        self.started_at = manifest.now_iso()
        self.base_url = ""
        self.target: list[str] = []
        self.command: list[str] = []
        self.presets = hook_presets(opts)
        self.hook_env: dict[str, str] = {}
        self.prompts: list[driver.Prompt] = []

    @property
    def log(self) -> Path:
        return self.out / ("server.log" if self.opts.mode == "server" else "program.log")

    @property
    def nsys_output(self) -> Path:
        return self.out / nsys.REPORT_STEM

    # -- manifest --------------------------------------------------------------------------

    def manifest(self) -> dict:
        opts = self.opts
        options = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items() if k not in ("argv", "out")}
        doc = {
            "schema": manifest.SCHEMA,
            "status": self.status,
            "error": self.error,
            "mode": opts.mode,
            "backend": opts.backend,
            "started_at": self.started_at,
            "finished_at": None if self.status == "running" else manifest.now_iso(),
            "command": {"verifyprof": opts.argv, "target": self.target, "profiler": self.command},
            "options": options,
            "versions": self._versions,
            "hooks": {
                "presets": self.presets, "targets": opts.hook_targets, "env": sorted(self.hook_env),
                "processes": hook_reports(self.out / "hooks"),
            },
            "workload": None,
            "results": self.summary or None,
            "window": self.window or None,
            "traces": manifest.list_traces(self.out),
            "files": manifest.list_files(self.out),
            "target": {
                "exit_code": self.exit_code,
                "stopped_by": self.stop_report.stopped_by if self.stop_report else None,
                "leftover_pids": self.stop_report.leftover if self.stop_report else [],
                "log": self.log.name,
            },
        }
        if opts.mode == "server":
            doc["workload"] = {
                "requests": opts.requests, "concurrency": opts.concurrency, "input_len": opts.input_len,
                "output_len": opts.output_len, "prompts": str(opts.prompts) if opts.prompts else "builtin",
                "warmup": opts.warmup, "temperature": opts.temperature, "completed": len(self.results),
                "url": self.base_url,
            }
        return doc

    def write_manifest(self) -> dict:
        doc = self.manifest()
        manifest.write_json(self.out / manifest.MANIFEST, doc)
        if self.results:
            manifest.write_jsonl(self.out / "requests.jsonl", (r.to_json() for r in self.results))
        return doc

    # -- steps -----------------------------------------------------------------------------

    def setup(self) -> dict[str, str]:
        opts = self.opts
        if opts.backend == "nsys":
            self.nsys = nsys.find_nsys()
            self.nsys_version = nsys.nsys_version(self.nsys)
        if opts.mode == "server":
            self.prompts = driver.load_prompts(opts.prompts) if opts.prompts else driver.builtin_prompts()
            argv, host, port = server_address(shlex.split(opts.server_cmd or ""), opts.port)
            check_port_free(port, host)
            self.base_url = f"http://{host}:{port}"
            self.target = argv
        else:
            self.target = list(opts.program)
        self.hook_env = hooks_env(self.presets, opts.hook_targets, (self.out / "hooks").resolve())
        env = dict(os.environ)
        env.update(self.hook_env)
        env["VERIFYPROF_CAPTURE_DIR"] = str(self.out.resolve())
        if self.nsys is not None:
            self.command = nsys.profile_command(
                self.nsys, self.target, self.nsys_output, osrt=opts.osrt,
                capture_range=not (opts.mode == "program" and opts.capture_all),
            )
        else:
            self.command = list(self.target)
        self.out.mkdir(parents=True, exist_ok=True)  # only now: a rejected capture leaves nothing behind
        self._versions = manifest.versions(self.nsys_version)
        return env

    def start(self, env: dict[str, str]) -> None:
        echo = sys.stderr if self.opts.mode == "program" else None
        self.proc = ManagedProcess(self.command, log=self.log, env=env, echo=echo)
        what = "server" if self.opts.mode == "server" else "program"
        self.console.print(f"verifyprof: started {what} (pid {self.proc.pid}), log: {self.log}")

    def serve(self) -> None:
        opts, proc = self.opts, self.proc
        assert proc is not None
        with self.console.status(f"waiting for {self.base_url}/health (up to {opts.health_timeout:g} s)"):
            took = wait_healthy(self.base_url, proc, timeout=opts.health_timeout)
        self.console.print(f"verifyprof: server healthy after {took:.1f} s")
        prompts = self.prompts
        if opts.warmup:
            warm = driver.Workload(opts.warmup, min(opts.concurrency, opts.warmup), opts.output_len, opts.input_len, opts.temperature, opts.request_timeout)
            with self.console.status(f"warming up ({opts.warmup} requests)"):
                warm_results = driver.run_workload(self.base_url, warm, prompts, first_index=opts.requests, server_alive=proc.alive)
            failed = [r for r in warm_results if not r.ok]
            if failed:
                raise CaptureError(with_log_tail(f"warm-up request failed: {failed[0].error}", self.log, 10))
            with contextlib.suppress(driver.ServerGone, TimeoutError):
                driver.post_json(self.base_url + "/flush_cache", {}, timeout=30)
        if opts.backend != "none":
            self._start_profile()
        else:
            self.window["start_unix_ns"] = time.time_ns()
        workload = driver.Workload(opts.requests, opts.concurrency, opts.output_len, opts.input_len, opts.temperature, opts.request_timeout)
        self._drive(workload, prompts)
        if opts.backend != "none":
            self._stop_profile()
        else:
            self._close_window(None)
        self.summary = driver.summarize(self.results, driver.server_accept_length(self.base_url))
        self.server_version = _server_version(self.base_url)
        if self.server_version:
            self._versions["server"] = self.server_version
        failed = self.summary["requests_failed"]
        if failed == len(self.results):
            first = next(r.error for r in self.results if not r.ok)
            raise CaptureError(f"all {failed} requests failed, the first with {first}")
        if opts.backend == "torch":
            self._wait_for_torch_traces()

    def _start_profile(self) -> None:
        body = profile_body(self.opts.backend, self.out, self.opts.num_steps)
        self.window["start_unix_ns"] = time.time_ns()
        status, raw = driver.post_json(self.base_url + "/start_profile", body, timeout=120)
        self.window["start_reply"] = raw.decode("utf-8", errors="replace").strip()[:500]
        if status != 200:
            raise CaptureError(f"POST /start_profile {body} failed: HTTP {status}: {self.window['start_reply'][:200]}")
        self.profiling = True

    def _stop_profile(self, timeout: float = 600.0) -> None:
        self.window["stop_sent_unix_ns"] = time.time_ns()
        status, raw = driver.post_json(self.base_url + "/stop_profile", {}, timeout=timeout)
        self.profiling = False
        self._close_window(raw.decode("utf-8", errors="replace").strip()[:500])
        if status != 200 and self.opts.num_steps is None:
            raise CaptureError(f"POST /stop_profile failed: HTTP {status}: {self.window['stop_reply'][:200]}")
        # With --num-steps the server stopped by itself; its "not in progress" reply is expected.

    def _close_window(self, reply: str | None) -> None:
        end = time.time_ns()
        self.window.update(end_unix_ns=end, duration_ns=end - self.window.get("start_unix_ns", end), stop_reply=reply)

    def _drive(self, workload: driver.Workload, prompts: list[driver.Prompt]) -> None:
        assert self.proc is not None
        tokens = 0
        t0 = time.perf_counter()
        columns = (
            TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TextColumn("{task.fields[rate]}"),
        )
        with Progress(*columns, console=self.console, transient=False) as progress:
            task = progress.add_task("requests", total=workload.requests, rate="")

            def on_result(result: driver.RequestResult) -> None:
                nonlocal tokens
                self.results.append(result)
                tokens += result.completion_tokens or 0
                elapsed = time.perf_counter() - t0
                progress.update(task, advance=1, rate=f"{tokens / elapsed:,.0f} tok/s" if elapsed > 0 else "")

            driver.run_workload(self.base_url, workload, prompts, server_alive=self.proc.alive, on_result=on_result)

    def _wait_for_torch_traces(self) -> None:
        """SGLang exports each rank's trace after replying to /stop_profile (or after num_steps)."""
        root = self.out / TORCH_TRACE_DIR
        deadline = time.monotonic() + self.opts.trace_wait
        last: tuple = ()
        stable_since = None
        with self.console.status("waiting for the server's torch-profiler traces"):
            while time.monotonic() < deadline:
                files = tuple(sorted((p.name, p.stat().st_size) for p in root.glob("*.json*"))) if root.is_dir() else ()
                if files and files == last:
                    stable_since = stable_since or time.monotonic()
                    if time.monotonic() - stable_since >= 1.0:
                        return
                else:
                    stable_since = None
                last = files
                time.sleep(0.2)
        if not last:
            raise CaptureError(f"the server wrote no torch-profiler trace into {root} within {self.opts.trace_wait:g} s")

    def wait_program(self) -> None:
        assert self.proc is not None
        self.window["start_unix_ns"] = time.time_ns()
        code = self.proc.wait()
        self._close_window(None)
        self.exit_code = code
        self.summary = program_results(self.out)
        if code != 0:
            raise CaptureError(with_log_tail(f"program exited with {_describe_exit(code)}", self.log, 10))

    # -- cleanup ---------------------------------------------------------------------------

    def cleanup(self) -> None:
        """Stop the target, keep what was captured, export, write the manifest. Never raises
        for a step that fails: it records it and goes on to the next."""
        with _hurry_on_interrupt(self.console) as hurry:
            if self.profiling and self.proc is not None and self.proc.alive():
                self.console.print("verifyprof: stopping the profile so that what was captured is written")
                _unless_hurried(lambda: self._stop_profile(timeout=120), hurry, timeout=120)
            if self.results and not self.summary:  # a partial run: summarise what finished
                alive = self.proc is not None and self.proc.alive() and not hurry.is_set()
                with contextlib.suppress(Exception):
                    self.summary = driver.summarize(self.results, driver.server_accept_length(self.base_url, timeout=5) if alive else None)
            if self.proc is not None:
                leader_grace = self.opts.report_timeout if self.nsys is not None else None
                with self.console.status("stopping the target and all its processes") as status:
                    self.stop_report = self.proc.stop(
                        int_timeout=self.opts.stop_timeout, leader_grace=leader_grace, hurry=hurry,
                        on_phase=lambda text: status.update(f"stopping: {text}"),
                    )
                if self.exit_code is None:
                    self.exit_code = self.stop_report.exit_code
                if self.stop_report.leftover:
                    self._fail(f"{len(self.stop_report.leftover)} process(es) survived SIGKILL: pids {self.stop_report.leftover}")
            if self.nsys is not None and self.proc is not None:
                self._export()
            try:
                self.doc = self.write_manifest()
            except OSError as err:
                self._fail(f"cannot write {self.out / manifest.MANIFEST}: {err}")
                self.doc = self.manifest()

    def _export(self) -> None:
        assert self.nsys is not None
        report = nsys.report_path(self.nsys_output)
        if not report.exists():
            if self.status in ("running", "ok"):
                self._fail(nsys.explain_missing_report(self.nsys_output))
            return
        sqlite = report.with_suffix(".sqlite")
        try:
            with self.console.status(f"exporting {report.name} to SQLite"):
                nsys.export_sqlite(self.nsys, report, sqlite, self.out / "nsys-export.log")
            if self.opts.gzip:
                with self.console.status(f"compressing {sqlite.name}"):
                    nsys.gzip_export(sqlite)
        except VerifyprofError as err:
            self._fail(str(err))
        except OSError as err:
            self._fail(f"cannot compress {sqlite}: {err}")

    def _fail(self, message: str) -> None:
        if self.status in ("running", "ok"):
            self.status = "failed"
            self.error = message
        elif self.error and message not in self.error:
            self.error = f"{self.error}; {message}"


def _unless_hurried(fn, hurry: threading.Event, timeout: float) -> None:
    """Run ``fn`` (errors ignored) but give up waiting for it at once when ``hurry`` is set."""
    worker = threading.Thread(target=_quietly, args=(fn,), daemon=True)
    worker.start()
    deadline = time.monotonic() + timeout
    while worker.is_alive() and not hurry.is_set() and time.monotonic() < deadline:
        worker.join(0.1)


def _quietly(fn) -> None:
    try:
        fn()
    except Exception:
        pass


def _server_version(base_url: str) -> str | None:
    import json

    for path in ("/server_info", "/get_server_info"):
        with contextlib.suppress(Exception):
            status, raw = http_get(base_url + path, timeout=10)
            if status == 200:
                version = json.loads(raw).get("version")
                return str(version) if version else None
    return None


def capture(opts: CaptureOptions, console: Console | None = None) -> CaptureResult:
    """Run one capture. Raises ``VerifyprofError`` (bad input, exit 2), ``CaptureError`` (the
    run failed, exit 1) or ``KeyboardInterrupt`` (Ctrl-C / SIGTERM); in every case the target is
    stopped and the manifest written before it returns or raises."""
    console = console or Console(stderr=True, soft_wrap=True)
    validate(opts)
    with _sigterm_as_interrupt():
        run = _Run(opts, console)
        env = run.setup()  # may raise before anything was started: nothing to clean up
        run.write_manifest()
        failure: BaseException | None = None
        try:
            run.start(env)
            if opts.mode == "server":
                run.serve()
            else:
                run.wait_program()
            run.status = "ok"
        except KeyboardInterrupt as err:
            run.status, run.error, failure = "interrupted", f"interrupted ({'SIGTERM' if isinstance(err, Terminated) else 'Ctrl-C'})", err
        except driver.ServerGone as err:
            done = len(run.results)
            code = run.proc.wait(timeout=3.0) if run.proc else None  # a dying server may close its socket first
            how = f"exited with code {code}" if code is not None else f"stopped answering ({err})"
            run.status, failure = "failed", err
            run.error = with_log_tail(f"server {how} after {done}/{opts.requests} requests", run.log, LOG_TAIL_LINES)
        except VerifyprofError as err:
            run.status, run.error, failure = "failed", str(err), err
        except BaseException as err:
            run.status, run.error, failure = "failed", f"{type(err).__name__}: {err}", err
            raise
        finally:
            run.cleanup()
    if isinstance(failure, KeyboardInterrupt):
        console.print(f"verifyprof: capture interrupted; partial outputs kept in {run.out}")
        raise failure
    if run.status != "ok":
        first, _, rest = (run.error or "failed").partition("\n")
        raise CaptureError(f"{first} (outputs kept in {run.out})" + (f"\n{rest}" if rest else ""))
    return CaptureResult(run.out, run.doc)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "an unknown status"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
    return f"code {code}"


def summary_lines(result: CaptureResult) -> list[str]:
    """What the CLI prints after a successful capture."""
    doc = result.manifest
    lines = []
    res = doc.get("results") or {}
    if res:
        tps = res.get("tokens_per_s")
        acc = res.get("accept_len")
        srv = res.get("server_avg_spec_accept_length")
        if "requests_ok" in res:
            lines.append(
                f"requests: {res['requests_ok']} ok, {res.get('requests_failed', 0)} failed; "
                + (f"{res.get('completion_tokens', 0)} tokens at {tps:,.1f} tok/s" if tps else "no completed requests")
            )
        elif isinstance(tps, (int, float)):
            lines.append(f"throughput: {tps:,.1f} tok/s (reported by the program)")
        lines.append(
            "accept length: " + (f"{acc:.3f} tokens/verify" if isinstance(acc, (int, float)) else "not reported")
            + (f", server average {srv:.3f}" if isinstance(srv, (int, float)) else "")
        )
    if (doc.get("window") or {}).get("duration_ns"):
        what = "capture window" if doc.get("mode") == "server" else "program ran"
        lines.append(f"{what}: {doc['window']['duration_ns'] / 1e9:.2f} s")
    for trace in doc.get("traces", []):
        lines.append(f"trace: {result.out / trace['path']} ({trace['kind']}, {trace['bytes']:,} bytes)")
    lines.append(f"manifest: {result.manifest_path}")
    return lines
