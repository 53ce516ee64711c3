"""A real HTTP server process speaking the subset of SGLang's API that ``verifyprof capture`` uses.

Like SGLang, an HTTP front end (threaded, stdlib) hands requests to a *scheduler* child process
started with multiprocessing's ``spawn``; the scheduler batches all active requests into
speculative "verify steps" (real torch work under SGLang's ``step[TARGET_VERIFY bs=N]``
record_function span), accepting ``--accept-len`` tokens per step on average. Profiling runs in
the scheduler, as in SGLang: ``CPU``/``GPU`` activities write a real PyTorch-profiler trace named
``{profile_id}-TP-0.trace.json.gz``; ``CUDA_PROFILER`` calls ``cudaProfilerStart/Stop`` when a GPU
is present (so nsys's ``--capture-range=cudaProfilerApi`` works on a GPU machine).

Endpoints: ``GET /health`` (503 while starting), ``POST /generate`` (``{text, output_ids,
meta_info}`` with the spec fields of SGLang >= 0.5), ``GET|POST /start_profile`` and
``/stop_profile`` (plain text; 500 when stopping with no profile running), ``GET /server_info``.

Failure switches (flags): ``--startup-delay S``, ``--never-healthy``, ``--exit-at-start CODE``,
``--die-after-requests N`` (the front end crashes, leaving its scheduler orphaned),
``--hang-after-requests N`` (every /generate after the first N never answers),
``--ignore-sigint``, ``--ignore-sigterm`` (SIG_IGN: capture sees it and does not wait it
out), ``--deaf-sigint`` (a handler that does nothing: capture waits its grace),
``--detached-child`` (the scheduler starts a helper in
a new session, outside the process group). ``--no-torch``: the scheduler loads no torch "model"
(no torch work, no profiler), for tests of process management that never profile: importing
torch costs about a second of CPU per start. Unknown flags (SGLang's own) are ignored.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import multiprocessing as mp
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def log(text: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"[{stamp}] {text}", file=sys.stderr, flush=True)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--accept-len", type=float, default=2.5, help="mean tokens per verify step")
    parser.add_argument(
        "--num-draft-tokens", type=int, default=4, help="verify width (draft tokens + 1)"
    )
    parser.add_argument("--step-ms", type=float, default=5.0, help="sleep per verify step")
    parser.add_argument(
        "--startup-delay", type=float, default=0.0, help="extra seconds /health answers 503"
    )
    parser.add_argument("--never-healthy", action="store_true")
    parser.add_argument("--exit-at-start", type=int, default=None, metavar="CODE")
    parser.add_argument("--die-after-requests", type=int, default=None, metavar="N")
    parser.add_argument("--hang-after-requests", type=int, default=None, metavar="N")
    parser.add_argument("--ignore-sigint", action="store_true")
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--deaf-sigint", action="store_true")
    parser.add_argument("--detached-child", action="store_true")
    parser.add_argument(
        "--no-torch", action="store_true", help="no torch model or profiler in the scheduler"
    )
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        log(f"ignoring SGLang arguments: {' '.join(unknown)}")
    if not 1.0 <= args.accept_len <= args.num_draft_tokens:
        parser.error("--accept-len must be between 1 and --num-draft-tokens")
    return args


def ignore_signals(cfg: dict) -> None:
    if cfg["ignore_sigint"]:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if cfg["ignore_sigterm"]:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if cfg["deaf_sigint"]:
        signal.signal(signal.SIGINT, lambda signum, frame: log("SIGINT: not stopping"))


# ------------------------------------------------------------------------------------------
# the scheduler child


class Profiler:
    """SGLang's profiling in the scheduler: torch profiler and/or cudaProfilerStart/Stop."""

    def __init__(self, torch) -> None:
        self.torch = torch
        self.prof = None
        self.cuda_profiler = False
        self.active = False
        self.steps_left: int | None = None
        self.path = ""

    def start(self, body: dict) -> tuple[bool, str]:
        if self.active:
            return False, "Profiling is already in progress. Call /stop_profile first."
        torch = self.torch
        activities = body.get("activities") or ["CPU", "GPU"]
        output_dir = body.get("output_dir") or os.environ.get("SGLANG_TORCH_PROFILER_DIR", "/tmp")
        profile_id = body.get("profile_id") or str(time.time())
        kinds = []
        if "CPU" in activities:
            kinds.append(torch.profiler.ProfilerActivity.CPU)
        if "GPU" in activities and torch.cuda.is_available():
            kinds.append(torch.profiler.ProfilerActivity.CUDA)
        if kinds:
            os.makedirs(output_dir, exist_ok=True)
            self.path = os.path.join(output_dir, f"{profile_id}-TP-0.trace.json.gz")
            self.prof = torch.profiler.profile(
                activities=kinds,
                with_stack=bool(body.get("with_stack", True)),
                record_shapes=bool(body.get("record_shapes", True)),
            )
            self.prof.start()
        if "CUDA_PROFILER" in activities:
            self.cuda_profiler = True
            if torch.cuda.is_available():
                torch.cuda.cudart().cudaProfilerStart()
            else:
                log("CUDA_PROFILER requested, but there is no GPU: nothing to start")
        self.active = True
        self.steps_left = body.get("num_steps")
        log(
            f"Profiling starts. activities={activities} output_dir={output_dir}"
            f" num_steps={self.steps_left}"
        )
        return True, "Start profiling.\n"

    def stop(self) -> tuple[bool, str]:
        if not self.active:
            return False, "Profiling is not in progress. Call /start_profile first."
        if self.prof is not None:
            self.prof.stop()
            self.prof.export_chrome_trace(self.path)
            log(f"Profiling done. Traces are saved to: {self.path}")
            self.prof = None
        if self.cuda_profiler and self.torch.cuda.is_available():
            self.torch.cuda.synchronize()
            self.torch.cuda.cudart().cudaProfilerStop()
        self.cuda_profiler = False
        self.active = False
        return True, "Stop profiling. This will take some time.\n"

    def step_done(self) -> None:
        if self.active and self.steps_left is not None:
            self.steps_left -= 1
            if self.steps_left <= 0:
                self.stop()


def scheduler_main(requests: mp.Queue, results: mp.Queue, cfg: dict) -> None:
    ignore_signals(cfg)
    try:
        _scheduler_loop(requests, results, cfg)
    except KeyboardInterrupt:
        pass


def _scheduler_loop(requests: mp.Queue, results: mp.Queue, cfg: dict) -> None:
    torch = (
        None if cfg["no_torch"] else importlib.import_module("torch")
    )  # the "model load": slow, like the real thing

    if cfg["detached_child"]:
        helper = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(3600)"], start_new_session=True
        )
        log(f"started detached helper pid={helper.pid}")
    if torch is not None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        torch.manual_seed(0)
        weight = torch.randn(256, 256, device=device)
    profiler = Profiler(torch) if torch is not None else None
    accept_len, width, step_s = cfg["accept_len"], cfg["num_draft_tokens"], cfg["step_ms"] / 1000.0
    active: dict[int, dict] = {}
    steps = 0
    results.put(("ready", os.getpid()))
    while True:
        try:
            msg = requests.get(timeout=0.05) if not active else requests.get_nowait()
        except queue.Empty:
            msg = None
        while msg is not None:
            kind = msg[0]
            if kind == "quit":
                return
            if kind == "gen":
                _, rid, prompt_tokens, max_new = msg
                active[rid] = {
                    "prompt_tokens": prompt_tokens,
                    "target": max_new,
                    "done": 0,
                    "verify_ct": 0,
                    "credit": 0.0,
                }
            elif kind in ("start_profile", "stop_profile"):
                _, cid, body = msg
                if profiler is None:
                    ok, text = False, "This server has no torch (--no-torch): no profiler."
                else:
                    ok, text = profiler.start(body) if kind == "start_profile" else profiler.stop()
                results.put(("profile", cid, ok, text))
            try:
                msg = requests.get_nowait()
            except queue.Empty:
                msg = None
        if not active:
            continue
        bs = len(active)
        if torch is not None:
            with torch.profiler.record_function(f"step[TARGET_VERIFY bs={bs}]"):
                x = torch.randn(bs * width, 256, device=device)
                (x @ weight).relu_().sum().item()
        time.sleep(step_s)
        steps += 1
        if profiler is not None:
            profiler.step_done()
        for rid in list(active):
            req = active[rid]
            req["credit"] += accept_len
            emitted = min(int(req["credit"]), req["target"] - req["done"])
            req["credit"] -= int(req["credit"])
            req["done"] += emitted
            req["verify_ct"] += 1
            if req["done"] >= req["target"]:
                results.put(("done", rid, active.pop(rid)))
        if steps % 50 == 0:
            log(f"Decode batch. #running-req: {bs}, accept len: {accept_len:.2f}")


# ------------------------------------------------------------------------------------------
# the HTTP front end


class FrontEnd:
    def __init__(self, args: argparse.Namespace, requests: mp.Queue, results: mp.Queue) -> None:
        self.args = args
        self.requests = requests
        self.results = results
        self.ready_at: float | None = None
        self.lock = threading.Lock()
        self.waiters: dict[int, tuple[threading.Event, list]] = {}
        self.next_id = 0
        self.served = 0
        self.total_tokens = 0
        self.total_verify = 0

    def dispatch(self) -> None:
        while True:
            msg = self.results.get()
            if msg[0] == "ready":
                self.ready_at = time.monotonic() + self.args.startup_delay
                log(f"scheduler ready (pid {msg[1]}); The server is fired up and ready to roll!")
                continue
            with self.lock:
                event, box = self.waiters.pop(msg[1])
            box.append(msg)
            event.set()

    def call(self, make_msg, timeout: float = 600.0):
        event, box = threading.Event(), []
        with self.lock:
            rid = self.next_id
            self.next_id += 1
            self.waiters[rid] = (event, box)
        self.requests.put(make_msg(rid))
        if not event.wait(timeout):
            raise TimeoutError("scheduler did not answer")
        return box[0]

    def healthy(self) -> bool:
        return (
            not self.args.never_healthy
            and self.ready_at is not None
            and time.monotonic() >= self.ready_at
        )

    def generate(self, body: dict) -> dict:
        params = body.get("sampling_params") or {}
        max_new = int(params.get("max_new_tokens", 128))
        if "input_ids" in body:
            prompt_tokens = len(body["input_ids"])
        else:
            prompt_tokens = max(1, math.ceil(len(str(body.get("text", "")).split()) * 4 / 3))
        _, _, req = self.call(lambda rid: ("gen", rid, prompt_tokens, max_new))
        n, verify_ct, width = req["done"], req["verify_ct"], self.args.num_draft_tokens
        correct = n - verify_ct
        proposed = verify_ct * (width - 1)
        with self.lock:
            self.served += 1
            self.total_tokens += n
            self.total_verify += verify_ct
        return {
            "text": " tok" * n,
            "output_ids": [(7 * i) % 32000 for i in range(n)],
            "meta_info": {
                "id": f"req-{self.served}",
                "finish_reason": {"type": "length", "length": n},
                "prompt_tokens": prompt_tokens,
                "completion_tokens": n,
                "cached_tokens": 0,
                "spec_verify_ct": verify_ct,
                "spec_accept_length": n / verify_ct if verify_ct else 0.0,
                "spec_accept_rate": correct / proposed if proposed else 0.0,
                "spec_num_correct_drafts": correct,
                "spec_num_proposed_drafts": proposed,
                "spec_accepted_drafts": correct,
                "spec_proposed_drafts": proposed,
            },
        }

    def server_info(self) -> dict:
        with self.lock:
            avg = self.total_tokens / self.total_verify if self.total_verify else 0.0
        return {
            "version": "0.0.0-fake",
            "speculative_algorithm": "EAGLE3",
            "speculative_num_draft_tokens": self.args.num_draft_tokens,
            "internal_states": [{"avg_spec_accept_length": avg, "last_gen_throughput": 0.0}],
        }


def make_handler(front: FrontEnd):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args) -> None:
            log(f'{self.address_string()} "{self.requestline}" {args[1] if len(args) > 1 else ""}')

        def reply(
            self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8"
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def body(self) -> dict:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            return json.loads(raw) if raw.strip() else {}

        def do_GET(self) -> None:
            self.route("GET")

        def do_POST(self) -> None:
            self.route("POST")

        def route(self, method: str) -> None:
            path = self.path.split("?", 1)[0]
            try:
                if path in ("/health", "/health_generate"):
                    ok = front.healthy()
                    self.reply(200 if ok else 503, b"" if ok else b"starting")
                elif path == "/generate" and method == "POST":
                    hang = front.args.hang_after_requests
                    if hang is not None and front.served >= hang:
                        log(f"hung: no reply after {front.served} requests")
                        threading.Event().wait()  # the connection open, never a byte back
                    out = front.generate(self.body())
                    self.reply(200, json.dumps(out).encode(), "application/json")
                    limit = front.args.die_after_requests
                    if limit is not None and front.served >= limit:
                        log(f"fatal: simulated crash after {front.served} requests")
                        self.wfile.flush()
                        os._exit(1)
                elif path in ("/start_profile", "/stop_profile"):
                    body = self.body() if method == "POST" else {}
                    _, _, ok, text = front.call(lambda cid: (path[1:], cid, body))
                    self.reply(200 if ok else 500, text.encode())
                elif path in ("/server_info", "/get_server_info") and method == "GET":
                    self.reply(200, json.dumps(front.server_info()).encode(), "application/json")
                else:
                    self.reply(404, b"Not Found")
            except (json.JSONDecodeError, ValueError, TypeError) as err:
                self.reply(400, f"bad request: {err}".encode())

    return Handler


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    cfg = {
        k: getattr(args, k)
        for k in (
            "accept_len",
            "num_draft_tokens",
            "step_ms",
            "ignore_sigint",
            "ignore_sigterm",
            "deaf_sigint",
            "detached_child",
            "no_torch",
        )
    }
    ignore_signals(cfg)
    log(f"server_args={vars(args)}")
    if args.exit_at_start is not None:
        time.sleep(0.3)
        log("RuntimeError: CUDA out of memory. Tried to allocate 20.00 GiB (simulated)")
        return args.exit_at_start
    ctx = mp.get_context("spawn")
    requests, results = ctx.Queue(), ctx.Queue()
    scheduler = ctx.Process(
        target=scheduler_main, args=(requests, results, cfg), name="fake-scheduler"
    )
    scheduler.start()
    log(f"Load weight begin. scheduler pid={scheduler.pid}")
    front = FrontEnd(args, requests, results)
    threading.Thread(target=front.dispatch, daemon=True).start()
    httpd = ThreadingHTTPServer((args.host, args.port), make_handler(front))
    httpd.daemon_threads = True
    log(f"Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")
    if args.never_healthy:
        threading.Thread(target=_complain_forever, daemon=True).start()
    try:
        httpd.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        log("Shutting down (SIGINT)")
    finally:
        httpd.server_close()
        requests.put(("quit",))
        scheduler.join(timeout=5)
        if scheduler.is_alive():
            scheduler.terminate()
            scheduler.join(timeout=5)
    return 0


def _complain_forever() -> None:
    n = 0
    while True:
        n += 1
        log(f"Capturing batches (bs={n} avail_mem=70.00 GB): still not ready")
        time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
