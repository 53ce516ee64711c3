"""The request workload: N ``POST /generate`` requests at a given concurrency, with SGLang's
per-request speculative metrics (``meta_info``) collected beside client-side tokens/s.

Stdlib HTTP only (no proxy, so nothing between us and a local server). Workers are daemon
threads: a Ctrl-C or a dead server never waits for an in-flight request to time out.
"""

from __future__ import annotations

import http.client
import json
import math
import queue
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.plumbing.inputs import PROMPTS_LIMIT, parse_json, read_text

# meta_info fields (REFERENCE 5.10) kept per request; older servers have only some of them.
SPEC_FIELDS = (
    "spec_verify_ct",
    "spec_accept_length",
    "spec_accept_rate",
    "spec_num_correct_drafts",
    "spec_num_proposed_drafts",
    "spec_accepted_drafts",
    "spec_proposed_drafts",
)
GONE_GRACE_S = 10.0  # at most, for a dead server's workers to queue the replies they read
# (a dead server ends a request at once: the workers stop as soon as they are scheduled)
WORDS_PER_TOKEN = 0.75  # English text through a BPE tokenizer; used only to size built-in prompts


@dataclass(frozen=True)
class Prompt:
    text: str
    max_new_tokens: int | None = None


@dataclass
class RequestResult:
    index: int
    ok: bool
    start_ns: int  # time.time_ns() when sent
    latency_s: float
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    spec: dict[str, float] = field(default_factory=dict)
    error: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


class ServerGone(Exception):
    """The server stopped answering (connection refused/reset): not a per-request failure."""


class NoReply(ServerGone):
    """No reply in ``--request-timeout``: the server is hung; the workload ends, not waits again."""


class DeadlinePassed(VerifyprofError):
    """The workload ran past ``--deadline``: it ends with what finished (exit 1)."""

    exit_code = 1


# ------------------------------------------------------------------------------------------
# prompts


def builtin_prompts() -> list[Prompt]:
    text = (
        resources.files("verifyprof").joinpath("data", "prompts.jsonl").read_text(encoding="utf-8")
    )
    return _parse_prompts(text, Path("verifyprof/data/prompts.jsonl"))


def load_prompts(path: Path) -> list[Prompt]:
    """JSONL, one object per line: ``{"prompt"|"text": str, "max_new_tokens"|"output_len":
    int}``."""
    text = read_text(path, "prompts file", PROMPTS_LIMIT, missing="prompts file not found")
    return _parse_prompts(text, Path(path))


def _parse_prompts(text: str, path: Path) -> list[Prompt]:
    prompts = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = parse_json(line, f"line {number}", path)
        except json.JSONDecodeError as err:
            raise VerifyprofError(f"line {number} is not JSON: {err.msg}", path) from err
        if not isinstance(row, dict):
            raise VerifyprofError(f'line {number}: expected an object with a "prompt" string', path)
        prompt = row.get("prompt", row.get("text"))
        if not isinstance(prompt, str) or not prompt:
            raise VerifyprofError(f'line {number}: no "prompt" (or "text") string', path)
        max_new = row.get("max_new_tokens", row.get("output_len"))
        if max_new is not None and (
            not isinstance(max_new, int) or isinstance(max_new, bool) or max_new < 1
        ):
            raise VerifyprofError(f"line {number}: max_new_tokens must be a positive integer", path)
        prompts.append(Prompt(prompt, max_new))
    if not prompts:
        raise VerifyprofError("no prompts in file", path)
    return prompts


def sized_prompt(prompts: Sequence[Prompt], index: int, input_len: int | None) -> str:
    """Prompt ``index`` (cycling), grown or cut to about ``input_len`` tokens of natural text.

    Real text, not random ids: acceptance depends on how predictable the text is. The length is
    approximate (no tokenizer); the server's ``prompt_tokens`` are recorded as measured.
    """
    base = prompts[index % len(prompts)].text
    if input_len is None:
        return base
    want = max(1, round(input_len * WORDS_PER_TOKEN))
    words = base.split()
    k = 1
    while len(words) < want:
        words += prompts[(index + k) % len(prompts)].text.split()
        k += 1
    return " ".join(words[:want])


# ------------------------------------------------------------------------------------------
# HTTP


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def post_json(url: str, body: dict, timeout: float) -> tuple[int, bytes]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read() if err.fp is not None else b""
    except urllib.error.URLError as err:
        if isinstance(err.reason, TimeoutError):
            raise TimeoutError(str(err.reason)) from err
        raise ServerGone(str(err.reason)) from err
    except (ConnectionError, http.client.HTTPException) as err:
        raise ServerGone(f"{type(err).__name__}: {err}") from err


def server_accept_length(base_url: str, timeout: float = 10.0) -> float | None:
    """``internal_states[0].avg_spec_accept_length`` of ``/server_info`` (or the older alias)."""
    for path in ("/server_info", "/get_server_info"):
        try:
            with _OPENER.open(base_url + path, timeout=timeout) as resp:
                info = json.loads(resp.read())
        except (OSError, urllib.error.URLError, ValueError, RecursionError):
            continue
        states = info.get("internal_states") if isinstance(info, dict) else None
        if isinstance(states, list) and states and isinstance(states[0], dict):
            value = states[0].get("avg_spec_accept_length")
            if isinstance(value, (int, float)) and value > 0:
                return float(value)
        return None
    return None


# ------------------------------------------------------------------------------------------
# the workload


@dataclass(frozen=True)
class Workload:
    requests: int
    concurrency: int
    output_len: int
    input_len: int | None = None
    temperature: float = 0.0
    timeout_s: float = 600.0

    def __post_init__(self) -> None:
        for name in ("requests", "concurrency", "output_len"):
            if getattr(self, name) < 1:
                raise VerifyprofError(f"--{name.replace('_', '-')} must be at least 1")
        if self.input_len is not None and self.input_len < 1:
            raise VerifyprofError("--input-len must be at least 1")


def generate_body(text: str, max_new_tokens: int, temperature: float) -> dict:
    """A ``/generate`` request producing exactly ``max_new_tokens`` (EOS ignored)."""
    return {
        "text": text,
        "sampling_params": {
            "max_new_tokens": max_new_tokens,
            "temperature": temperature,
            "ignore_eos": True,
        },
    }


def parse_generate_reply(
    index: int, start_ns: int, latency_s: float, status: int, raw: bytes
) -> RequestResult:
    if status != 200:
        snippet = raw[:200].decode("utf-8", errors="replace").strip()
        return RequestResult(index, False, start_ns, latency_s, error=f"HTTP {status}: {snippet}")
    try:
        reply = json.loads(raw)
        meta = reply["meta_info"] if isinstance(reply, dict) else reply[0]["meta_info"]
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        return RequestResult(index, False, start_ns, latency_s, error="reply has no meta_info")
    spec = {  # NaN and infinity are not JSON: not recorded
        k: meta[k]
        for k in SPEC_FIELDS
        if isinstance(meta.get(k), (int, float)) and math.isfinite(meta[k])
    }
    return RequestResult(
        index,
        True,
        start_ns,
        latency_s,
        prompt_tokens=meta.get("prompt_tokens"),
        completion_tokens=meta.get("completion_tokens"),
        spec=spec,
    )


ProgressFn = Callable[[RequestResult], None]


def run_workload(
    base_url: str,
    workload: Workload,
    prompts: Sequence[Prompt],
    *,
    first_index: int = 0,
    server_alive: Callable[[], bool] | None = None,
    on_result: ProgressFn | None = None,
    deadline: tuple[float, float] | None = None,
) -> list[RequestResult]:
    """Send the requests; the results in completion order.

    Returns early (with what finished) only by raising: ``ServerGone`` when the server stops
    answering (``NoReply``: a request unanswered in the workload's timeout) or ``server_alive``
    turns false, ``DeadlinePassed`` past ``deadline`` (``time.monotonic()`` value, and the
    seconds it was given as), ``KeyboardInterrupt`` from the caller's thread. The partial results
    are attached to the exception as ``.results``.
    """
    todo: queue.Queue[int] = queue.Queue()
    for i in range(workload.requests):
        todo.put(first_index + i)
    done: queue.Queue[RequestResult | ServerGone] = queue.Queue()
    stop = threading.Event()
    url = base_url + "/generate"

    def worker() -> None:
        while not stop.is_set():
            try:
                index = todo.get_nowait()
            except queue.Empty:
                return
            prompt = prompts[index % len(prompts)]
            body = generate_body(
                sized_prompt(prompts, index, workload.input_len),
                prompt.max_new_tokens or workload.output_len,
                workload.temperature,
            )
            start_ns, t0 = time.time_ns(), time.perf_counter()
            try:
                status, raw = post_json(url, body, workload.timeout_s)
            except ServerGone as err:
                done.put(err)
                return
            except TimeoutError:
                done.put(NoReply(f"no reply in {workload.timeout_s:g} s, --request-timeout"))
                return
            done.put(parse_generate_reply(index, start_ns, time.perf_counter() - t0, status, raw))

    named = "verifyprof-req-{}".format
    n = min(workload.concurrency, workload.requests)
    threads = [threading.Thread(target=worker, daemon=True, name=named(i)) for i in range(n)]
    for t in threads:
        t.start()
    results: list[RequestResult] = []
    try:
        while len(results) < workload.requests:
            if deadline is not None and time.monotonic() >= deadline[0]:
                raise DeadlinePassed(f"the workload ran past --deadline {deadline[1]:g} s")
            try:
                item = done.get(timeout=0.2)
            except queue.Empty:
                if server_alive is not None and not server_alive():
                    _finished_as_it_went(threads, stop, done, results, on_result)
                    raise ServerGone("server process exited") from None
                if not any(t.is_alive() for t in threads) and done.empty():
                    raise ServerGone("all request workers stopped") from None
                continue
            if isinstance(item, ServerGone):
                raise item
            results.append(item)
            if on_result is not None:
                on_result(item)
    except BaseException as err:
        stop.set()
        err.results = results  # type: ignore[attr-defined]
        raise
    return results


def _finished_as_it_went(
    threads: list[threading.Thread],
    stop: threading.Event,
    done: queue.Queue,
    results: list[RequestResult],
    on_result: ProgressFn | None,
) -> None:
    """The requests answered before a dead server's exit was seen: a worker may still be between
    reading its reply and queueing it (a server that crashes right after a reply), so the count
    of what finished would come out one short. Waits a moment for the workers, then takes every
    reply they queued."""
    stop.set()
    deadline = time.monotonic() + GONE_GRACE_S
    for t in threads:
        t.join(max(deadline - time.monotonic(), 0.0))
    while True:
        try:
            item = done.get_nowait()
        except queue.Empty:
            return
        if isinstance(item, RequestResult):
            results.append(item)
            if on_result is not None:
                on_result(item)


# ------------------------------------------------------------------------------------------
# summary


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(results: Sequence[RequestResult], server_avg_accept: float | None = None) -> dict:
    """Aggregate numbers for the manifest.

    ``accept_len`` is token-weighted, sum(completion_tokens) / sum(spec_verify_ct), as SGLang
    computes its server-wide average (a mean of per-request ratios over-weights short requests).
    ``tokens_per_s`` is completion tokens over the span from the first send to the last reply.
    """
    ok = [r for r in results if r.ok]
    summary: dict = {
        "requests_ok": len(ok),
        "requests_failed": len(results) - len(ok),
        "prompt_tokens": sum(r.prompt_tokens or 0 for r in ok),
        "completion_tokens": sum(r.completion_tokens or 0 for r in ok),
        "server_avg_spec_accept_length": server_avg_accept,
    }
    if ok:
        t0 = min(r.start_ns for r in ok)
        t1 = max(r.start_ns + int(r.latency_s * 1e9) for r in ok)
        wall_s = (t1 - t0) / 1e9
        latencies = [r.latency_s for r in ok]
        summary["wall_s"] = wall_s
        summary["tokens_per_s"] = summary["completion_tokens"] / wall_s if wall_s > 0 else None
        summary["latency_s"] = {
            "mean": sum(latencies) / len(latencies),
            "p50": _percentile(latencies, 0.5),
            "p90": _percentile(latencies, 0.9),
        }
        per_request_tps = [
            r.completion_tokens / r.latency_s for r in ok if r.completion_tokens and r.latency_s > 0
        ]
        summary["tokens_per_s_per_request"] = (
            sum(per_request_tps) / len(per_request_tps) if per_request_tps else None
        )
    with_spec = [r for r in ok if r.spec.get("spec_verify_ct") and r.completion_tokens]
    verify_ct = sum(int(r.spec["spec_verify_ct"]) for r in with_spec)
    summary["spec_verify_ct"] = verify_ct
    summary["accept_len"] = (
        sum(r.completion_tokens for r in with_spec) / verify_ct if verify_ct else None
    )
    summary["accept_len_convention"] = "tokens_per_verify"  # bonus token included, as SGLang counts
    rates = [r.spec["spec_accept_rate"] for r in with_spec if "spec_accept_rate" in r.spec]
    summary["accept_rate"] = sum(rates) / len(rates) if rates else None
    return summary
