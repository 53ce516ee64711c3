"""Named predicates and range-attribute extractors that hook presets refer to.

Presets are data (TOML) and name these functions by string; the code that reads a host
program's objects lives here, small and defensive. Each entry declares the parameters of the
hooked function it reads (``params``: any one of them must exist), so the preset test can check
them against the real source of every version a preset claims to support.

An extractor must never touch GPU data in a way that synchronises (no ``.item()``, no ``int()``
of a device tensor): shapes and Python attributes only. Exceptions are swallowed by the wrapper.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class Call:
    """The arguments of one hooked call, looked up by parameter name without ``inspect`` per
    call."""

    __slots__ = ("args", "kwargs", "_index", "_offset")

    def __init__(self, args: tuple, kwargs: dict, index: dict[str, int], offset: int = 0):
        self.args = args
        self.kwargs = kwargs
        self._index = index
        self._offset = offset  # 1 for a method: arg0 is the first argument after self

    def positional(self, n: int) -> Any:
        """Argument ``n`` by position (``self`` of a method not counted), passed positionally or
        by the keyword of the parameter at that position; None if it was not passed."""
        i = n + self._offset
        if 0 <= i < len(self.args):
            return self.args[i]
        for name, position in self._index.items():
            if position == i:
                return self.kwargs.get(name)
        return None

    def arg(self, *names: str) -> Any:
        """The first of ``names`` that was passed (by keyword or position); None if none was."""
        for name in names:
            if name in self.kwargs:
                return self.kwargs[name]
            i = self._index.get(name)
            if i is not None and i < len(self.args):
                return self.args[i]
        return None


@dataclass(frozen=True)
class Entry:
    fn: Callable[[Call], Any]
    params: tuple[str, ...]  # the hooked function must have at least one of these parameters


PREDICATES: dict[str, Entry] = {}
EXTRACTORS: dict[str, Entry] = {}


def predicate(name: str, params: tuple[str, ...] = ()) -> Callable:
    def register(fn: Callable[[Call], bool]) -> Callable[[Call], bool]:
        PREDICATES[name] = Entry(fn, params)
        return fn

    return register


def extractor(name: str, params: tuple[str, ...] = ()) -> Callable:
    def register(fn: Callable[[Call], dict[str, object]]) -> Callable[[Call], dict[str, object]]:
        EXTRACTORS[name] = Entry(fn, params)
        return fn

    return register


def _rows(tensor: Any) -> int | None:
    shape = getattr(tensor, "shape", None)
    return int(shape[0]) if shape is not None and len(shape) else None


# --- SGLang -------------------------------------------------------------------------------
# ScheduleBatch (main) / ModelWorkerBatch (0.5.x) as `batch` / `model_worker_batch`; ForwardBatch
# as `forward_batch`; EagleVerifyInput as `spec_info` / `verify_input` / `batch.spec_info`.

_BATCH = ("batch", "model_worker_batch")


def _batch_size(batch: Any) -> int | None:
    return _rows(getattr(batch, "seq_lens", None))


def _draft_tokens(spec_info: Any) -> int | None:
    tokens = getattr(spec_info, "draft_token_num", None)
    return tokens if isinstance(tokens, int) else None


@predicate("sglang_spec_decode", params=_BATCH)
def _sglang_spec_decode(call: Call) -> bool:
    """A worker's ``forward_batch_generation`` on a decode batch (prefill batches are not spec
    steps)."""
    batch = call.arg(*_BATCH)
    return not (batch.forward_mode.is_extend() or getattr(batch, "is_extend_in_batch", False))


def _target_runner(call: Call) -> bool:
    return not getattr(call.arg("self"), "is_draft_worker", False)


@predicate("sglang_target_verify", params=("forward_batch",))
def _sglang_target_verify(call: Call) -> bool:
    return call.arg("forward_batch").forward_mode.is_target_verify() and _target_runner(call)


@predicate("sglang_target_decode", params=("forward_batch",))
def _sglang_target_decode(call: Call) -> bool:
    return call.arg("forward_batch").forward_mode.is_decode() and _target_runner(call)


@predicate("sglang_target_prefill", params=("forward_batch",))
def _sglang_target_prefill(call: Call) -> bool:
    mode = call.arg("forward_batch").forward_mode
    return mode.is_extend() and not mode.is_target_verify() and _target_runner(call)


def _int_attr(obj: Any, *names: str) -> int | None:
    for name in names:
        value = getattr(obj, name, None)
        if isinstance(value, int):
            return value
    return None


@extractor("sglang_batch", params=_BATCH)
def _sglang_batch(call: Call) -> dict[str, object]:
    return {"bs": _batch_size(call.arg(*_BATCH))}


@extractor("sglang_step", params=_BATCH)
def _sglang_step(call: Call) -> dict[str, object]:
    """A whole spec step: batch size and the verify width the worker is configured for."""
    worker = call.arg("self")
    return {
        "bs": _batch_size(call.arg(*_BATCH)),
        "tokens": _int_attr(worker, "speculative_num_draft_tokens", "draft_token_num"),
    }


@extractor("sglang_draft", params=_BATCH)
def _sglang_draft(call: Call) -> dict[str, object]:
    worker = call.arg("self")
    return {
        "bs": _batch_size(call.arg(*_BATCH)),
        "steps": _int_attr(worker, "speculative_num_steps"),
        "topk": _int_attr(worker, "topk"),
    }


@extractor("sglang_verify", params=_BATCH)
def _sglang_verify(call: Call) -> dict[str, object]:
    """V1 ``verify(batch, spec_info)``, V2 ``verify(batch)``, ``run_eagle_verify(batch, *,
    num_draft_tokens)``."""
    batch = call.arg(*_BATCH)
    spec_info = call.arg("spec_info") or getattr(batch, "spec_info", None)
    tokens = call.arg("num_draft_tokens")
    return {
        "bs": _batch_size(batch),
        "tokens": tokens if isinstance(tokens, int) else _draft_tokens(spec_info),
    }


@extractor("sglang_forward", params=("forward_batch",))
def _sglang_forward(call: Call) -> dict[str, object]:
    forward_batch = call.arg("forward_batch")
    bs = getattr(forward_batch, "batch_size", None)
    return {
        "bs": bs if isinstance(bs, int) else None,
        "tokens": _draft_tokens(getattr(forward_batch, "spec_info", None)),
    }


@extractor("sglang_accept", params=("verify_input", "batch", "self"))
def _sglang_accept(call: Call) -> dict[str, object]:
    """``eagle_sample(verify_input, batch, ...)`` or a method of the verify input itself."""
    spec_info = call.arg("verify_input", "self")
    return {"bs": _batch_size(call.arg("batch")), "tokens": _draft_tokens(spec_info)}


# --- transformers assisted generation -----------------------------------------------------


@extractor("hf_candidates", params=("input_ids",))
def _hf_candidates(call: Call) -> dict[str, object]:
    generator = call.arg("self")
    tokens = getattr(generator, "num_assistant_tokens", None)
    return {
        "bs": _rows(call.arg("input_ids")),
        "tokens": int(tokens) if isinstance(tokens, (int, float)) else None,
    }


@extractor("hf_forward", params=("input_ids",))
def _hf_forward(call: Call) -> dict[str, object]:
    """A model forward: its ``input_ids`` (or ``inputs_embeds``) are ``[bs, tokens]``."""
    ids = call.arg("input_ids")
    if ids is None:
        ids = call.arg("inputs_embeds")
    shape = getattr(ids, "shape", None)
    if shape is None or len(shape) < 2:
        return {}
    return {"bs": int(shape[0]), "tokens": int(shape[1])}


@extractor("hf_sampling", params=("candidate_length",))
def _hf_sampling(call: Call) -> dict[str, object]:
    tokens = call.arg("candidate_length")
    return {
        "bs": _rows(call.arg("candidate_input_ids")),
        "tokens": tokens if isinstance(tokens, int) else None,
    }


# --- verifyprof's own workload (verifyprof/workload/runner.py), the same text as its built-in
# ranges


def _workload(call: Call, tokens: int | None, graph: bool = True) -> dict[str, object]:
    run = call.arg("self").run_cfg
    attrs: dict[str, object] = {"bs": run.batch, "tokens": tokens}
    if graph:
        attrs["graph"] = bool(call.arg("graph"))
    return attrs


@extractor("workload_step", params=("graph",))
def _workload_step(call: Call) -> dict[str, object]:
    """spec_step, verify and draft_extend all span the k+1 verified positions."""
    return _workload(call, call.arg("self").run_cfg.num_draft + 1)


@extractor("workload_draft", params=("graph",))
def _workload_draft(call: Call) -> dict[str, object]:
    return _workload(call, call.arg("self").run_cfg.num_draft)


@extractor("workload_accept", params=("logits",))
def _workload_accept(call: Call) -> dict[str, object]:
    return _workload(call, call.arg("self").run_cfg.num_draft + 1, graph=False)


@extractor("workload_decode", params=("graph",))
def _workload_decode(call: Call) -> dict[str, object]:
    return _workload(call, 1)


@extractor("workload_sweep", params=("width",))
def _workload_sweep(call: Call) -> dict[str, object]:
    return _workload(call, call.arg("width")) | {"sweep": 1}
