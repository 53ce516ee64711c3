"""One capture's state, shared by the server flow, the program flow and the cleanup, so that
whatever stops the run early, the cleanup knows what got done and the manifest says so.

Also the steps every capture takes the same way: build the target's command and environment
(nothing is started until all of it passed), start it, and write the manifest."""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import asdict
from pathlib import Path

from rich.console import Console
from rich.markup import escape as markup_escape

from verifyprof.capture import driver, manifest_probes, nsys
from verifyprof.capture.hooks.api import main_module_problem
from verifyprof.capture.hooks.search_path import (
    importable_from,
    is_main_module,
    program_folder,
)
from verifyprof.capture.input_digests import file_digest, input_digests
from verifyprof.capture.process import ManagedProcess, StopReport
from verifyprof.capture.request import (
    CaptureOptions,
    check_out_dir,
    server_address,
    split_server_cmd,
)
from verifyprof.capture.server import check_port_free
from verifyprof.capture.signal_mask import stop_signals_deferred
from verifyprof.capture.target_hooks import hook_presets, hooks_env, hooks_record
from verifyprof.contracts.errors import ToolMissingError, VerifyprofError
from verifyprof.contracts.manifest import document
from verifyprof.contracts.manifest_records import now_iso
from verifyprof.contracts.plumbing.text import safe_text


class CaptureSession:
    """One capture: state shared by the steps, so the cleanup knows what got done."""

    def __init__(self, opts: CaptureOptions, console: Console) -> None:
        self.opts = opts
        self.console = console
        self.out = check_out_dir(opts.out)
        self.versions: dict = {}
        self.nsys: Path | None = None
        self.nsys_version: str | None = None
        self.proc: ManagedProcess | None = None
        self.results: list[driver.RequestResult] = []
        self.loads: list[dict] = []  # --concurrency 1,8,32: each load's window and rates
        self.summary: dict = {}
        self.window: dict = {}
        self.profiling = False
        self.server_version: str | None = None
        self.status = "running"
        self.error: str | None = None
        self.stop_report: StopReport | None = None
        self.exit_code: int | None = None
        self.started_at = now_iso()
        self.base_url = ""
        self.deadline: tuple[float, float] | None = None  # --deadline: (monotonic, seconds)
        self.target: list[str] = []
        self.inputs: list[dict] = []  # fingerprints of the files the target names
        self.cwd = os.getcwd()  # where the target runs: its relative paths are from here
        self.command: list[str] = []
        self.presets = hook_presets(opts)
        self.hook_env: dict[str, str] = {}
        self.prompts: list[driver.Prompt] = []
        self.prompts_digest: str | None = None  # the --prompts file's fingerprint
        self.program_folder: Path | None = None  # what the target's Python puts first on sys.path
        self.trace_ranges: int | None = None  # verifyprof ranges in the exported nsys trace
        self.no_ranges = False  # hooks were asked for and no verifyprof range was recorded
        self.dilation: dict | None = (
            None  # the profiler's slow-down, when an unprofiled rate was measured
        )
        self.baseline: dict | None = None  # program: the unprofiled baseline run (--baseline-run)
        self.made: list[Path] = []  # the folders make_out() made for --out, the deepest first
        self.doc: dict = {}  # the manifest as last written by the cleanup

    @property
    def log(self) -> Path:
        return self.out / ("server.log" if self.opts.mode == "server" else "program.log")

    @property
    def nsys_output(self) -> Path:
        return self.out / nsys.REPORT_STEM

    # -- manifest --------------------------------------------------------------------------

    def manifest(self) -> dict:
        opts = self.opts
        options = {
            k: str(v) if isinstance(v, Path) else v
            for k, v in asdict(opts).items()
            if k not in ("argv", "out", "load")
        }
        doc = document(
            status=self.status,
            error=self.error,
            mode=opts.mode,
            backend=opts.backend,
            started_at=self.started_at,
            finished_at=None if self.status == "running" else now_iso(),
            command={
                "verifyprof": opts.argv,
                "target": self.target,
                "profiler": self.command,
                "inputs": self.inputs,
                "cwd": self.cwd,
            },
            options=options,
            versions=self.versions,
            hooks=self.hooks(),
            workload=None,
            results=self.summary or None,
            window=self.window or None,
            traces=manifest_probes.list_traces(self.out),
            files=manifest_probes.list_files(self.out),
            target={
                "exit_code": self.exit_code,
                "stopped_by": self.stop_report.stopped_by if self.stop_report else None,
                "leftover_pids": self.stop_report.leftover if self.stop_report else [],
                "log": self.log.name,
            },
        )
        if self.dilation is not None:
            doc["dilation"] = self.dilation
        if self.loads:
            doc["loads"] = self.loads
        if opts.load is not None:
            doc["load"] = opts.load
        if opts.mode == "server":
            doc["workload"] = {
                "requests": opts.requests,
                "concurrency": opts.concurrency,
                "input_len": opts.input_len,
                "output_len": opts.output_len,
                "prompts": str(opts.prompts) if opts.prompts else "builtin",
                "prompts_digest": self.prompts_digest,  # taken before the server started
                "warmup": opts.warmup,
                "temperature": opts.temperature,
                "completed": len(self.results),
                "url": self.base_url,
            }
        return doc

    def hooks(self) -> dict:
        record = hooks_record(
            self.presets,
            self.opts.hook_targets,
            self.hook_env,
            self.out / "hooks",
            self.program_folder,
        )
        record["trace_ranges"] = self.trace_ranges
        return record

    def write_manifest(self) -> dict:
        doc = self.manifest()
        manifest_probes.write(self.out, doc)
        if self.results:
            manifest_probes.write_jsonl(
                self.out / "requests.jsonl", (r.to_json() for r in self.results)
            )
        return doc

    def fail(self, message: str) -> None:
        """Record a failure; one after the first is appended to the error, not lost."""
        if self.status in ("running", "ok"):
            self.status = "failed"
            self.error = message
        elif self.error and message not in self.error:
            self.error = f"{self.error}; {message}"

    # -- steps -----------------------------------------------------------------------------

    def setup(self) -> dict[str, str]:
        opts = self.opts
        if opts.backend == "nsys":
            try:
                self.nsys = nsys.find_nsys()
            except ToolMissingError as err:
                if opts.mode != "program":
                    raise
                raise ToolMissingError(
                    str(err).replace(nsys.HOW_TO_GET, nsys.PROGRAM_HOW_TO_GET)
                ) from None
            self.nsys_version = nsys.nsys_version(self.nsys)
        if opts.mode == "server":
            self.prompts = (
                driver.load_prompts(opts.prompts) if opts.prompts else driver.builtin_prompts()
            )
            self.prompts_digest = file_digest(Path(opts.prompts)) if opts.prompts else None
            argv, host, port = server_address(split_server_cmd(opts.server_cmd or ""), opts.port)
            check_port_free(port, host)
            self.base_url = f"http://{host}:{port}"
            self.target = argv
        else:
            self.target = list(opts.program)
        self.inputs = input_digests(self.target)
        self.hook_env = hooks_env(self.presets, opts.hook_targets, (self.out / "hooks").resolve())
        self.program_folder = program_folder(self.target)
        self._check_user_targets()
        env = dict(os.environ)
        env.update(self.hook_env)
        env["VERIFYPROF_CAPTURE_DIR"] = str(self.out.resolve())
        if self.nsys is not None:
            self.command = nsys.profile_command(
                self.nsys,
                self.target,
                self.nsys_output,
                osrt=opts.osrt,
                capture_range=not (opts.mode == "program" and opts.capture_all),
            )
        else:
            self.command = list(self.target)
        self.versions = manifest_probes.versions(self.nsys_version)
        return env  # nothing made yet: a rejected capture leaves nothing (make_out comes next)

    def make_out(self) -> None:
        """Make ``--out`` and write its first manifest ("running") with the stop signals held:
        a signal the instant the folder appears is delivered once the manifest is there, in the
        caller's try, so it is written as interrupted. (Made last in setup, a signal handled
        right after mkdir, before setup returned, unmade the folder a watcher had already seen.)
        A write that fails removes what was made."""
        self.made = _missing_folders(self.out)  # what mkdir makes, the deepest first
        with stop_signals_deferred():
            try:
                self.out.mkdir(parents=True, exist_ok=True)
                self.write_manifest()
            except OSError:
                self.unmake()
                raise

    def unmake(self) -> None:
        """Remove the folders make_out() made, where still empty (a write that failed: no empty
        --out left behind; a folder that was there stays)."""
        for folder in self.made:
            with contextlib.suppress(OSError):
                folder.rmdir()
        self.made = []

    def _check_user_targets(self) -> None:
        """Say now (not after minutes of loading) when a user target's module is neither in the
        program's own folder nor importable here; it still stays pending in the target, which
        may use another interpreter or extend its sys.path."""
        from verifyprof.capture.hooks.presets import parse_user_hook

        folders = [self.program_folder] if self.program_folder else []
        for text in self.opts.hook_targets:
            module = parse_user_hook(text).alternatives[0].target.module
            if is_main_module(
                module, self.target
            ):  # never patched: refused now, not after a capture that finds no range
                raise VerifyprofError(f"hook {text}: {main_module_problem(module)}")
            if not importable_from(module, folders):
                where = f"in the program's folder {self.program_folder} or" if folders else ""
                self.console.print(
                    f"[yellow]verifyprof: hook {text}: module {module} is not {where} importable"
                    " here; it is patched if the program imports it[/]"
                )

    def start(self, env: dict[str, str]) -> None:
        echo = sys.stderr if self.opts.mode == "program" else None
        with stop_signals_deferred():
            self.proc = ManagedProcess(self.command, log=self.log, env=env, echo=echo)
        what = "server" if self.opts.mode == "server" else "program"
        log = markup_escape(safe_text(str(self.log)))  # a name: escaped, never markup
        self.console.print(f"verifyprof: started {what} (pid {self.proc.pid}), log: {log}")


def _missing_folders(out: Path) -> list[Path]:
    """``out`` and each of its ancestors that does not exist yet, the deepest first."""
    missing: list[Path] = []
    folder = out
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing
