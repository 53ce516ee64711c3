"""Bytes of one PyTorch-profiler (Kineto) file -> its events, as fast as the format allows.

Parsing dominates the cost of reading a Kineto trace: a 150 MB file holds ~500k events, most of
them ``python_function`` and ``cpu_op`` with large ``args`` that verifyprof never reads. The fast
path decodes straight into typed ``msgspec`` structs that keep only the fields the readers use
(unknown keys are skipped without allocating, and structs are not GC-tracked): measured 3.5x
faster than ``orjson.loads`` and ~10x faster than a plain ``json.loads`` on the same file, at a
fraction of the memory. Files whose values have unexpected types (a string ``ts``, a list
``args``) fall back to a generic dict parse (orjson, else json) with the garbage collector off;
the event extractor reads either representation through :class:`EventFields`.
"""

from __future__ import annotations

import gc
import gzip
import zlib
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter
from pathlib import Path
from typing import Any, Iterator, Union

from verifyprof.contracts.errors import TraceError
from verifyprof.trace.formats import GZIP_MAGIC
from verifyprof.trace.path_checks import regular_file

try:  # declared dependency; the fallback keeps the reader usable where it is missing
    import msgspec
except ImportError:  # pragma: no cover - exercised only without msgspec
    msgspec = None

# Field name in the event model -> JSON key, where they differ.
JSON_KEYS = {
    "external_id": "External id",
    "collective_name": "Collective name",
    "in_nelems": "In msg nelems",
    "out_nelems": "Out msg nelems",
    "group_size": "Group size",
    "input_dims": "Input Dims",
    "input_type": "Input type",
}

if msgspec is not None:
    _Value = Union[int, float, str, list, dict, None]  # any JSON value but a nested struct

    class KinetoArgs(msgspec.Struct, gc=False):
        """The ``args`` keys any reader uses (GPU ops, runtime calls, metadata)."""

        correlation: _Value = None
        device: _Value = None
        stream: _Value = None
        bytes: _Value = None
        external_id: _Value = msgspec.field(default=None, name="External id")
        name: _Value = None  # ph M: process_name / thread_name
        labels: _Value = None  # ph M: process_labels ("CPU", "GPU 0")
        # NCCL kernels (and record_param_comms ops): the collective's message
        collective_name: _Value = msgspec.field(default=None, name="Collective name")
        in_nelems: _Value = msgspec.field(default=None, name="In msg nelems")
        out_nelems: _Value = msgspec.field(default=None, name="Out msg nelems")
        dtype: _Value = None
        group_size: _Value = msgspec.field(default=None, name="Group size")
        # cpu_op shapes, left undecoded (zero-copy) until a collective kernel without NCCL args
        # needs its launching op's tensor size
        input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Dims")
        input_type: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input type")

    class KinetoEvent(msgspec.Struct, gc=False):
        ph: _Value = None
        cat: _Value = None
        name: _Value = None
        pid: _Value = None
        tid: _Value = None
        ts: Union[float, None] = None
        dur: Union[float, None] = None
        args: Union[KinetoArgs, None] = None

    class KinetoDocument(msgspec.Struct, gc=False):
        traceEvents: Union[list[KinetoEvent], None] = None
        schemaVersion: Any = None
        baseTimeNanoseconds: Any = None
        distributedInfo: Any = None
        deviceProperties: Any = None
        cupti_version: Any = None
        cuda_runtime_version: Any = None
        cuda_driver_version: Any = None
        roctracer_version: Any = None
        hip_runtime_version: Any = None
        hip_driver_version: Any = None
        trace_id: Any = None

    _DECODER = msgspec.json.Decoder(Union[KinetoDocument, list[KinetoEvent]])
    _EMPTY_ARGS = KinetoArgs()

HEADER_KEYS = (
    "schemaVersion",
    "baseTimeNanoseconds",
    "distributedInfo",
    "deviceProperties",
    "cupti_version",
    "cuda_runtime_version",
    "cuda_driver_version",
    "roctracer_version",
    "hip_runtime_version",
    "hip_driver_version",
    "trace_id",
)


class EventFields:
    """Column access over a list of events (or of their ``args``), structs or dicts alike."""

    def __init__(self, structs: bool):
        self.structs = structs
        self.empty_args: Any = _EMPTY_ARGS if structs else {}
        self.bad_values: Counter[str] = (
            Counter()
        )  # field -> values that are not numbers, read as missing
        self.dropped = 0  # GPU/host events dropped for want of a usable ts/dur

    def column(self, rows: list, key: str) -> list:
        """The value of ``key`` in every row (None where absent)."""
        if self.structs:
            return list(map(attrgetter(key), rows))
        return list(map(dict.get, rows, repeat(JSON_KEYS.get(key, key))))

    def args(self, rows: list) -> list:
        """Every row's ``args``, an empty one where the event has none."""
        args = self.column(rows, "args")
        if None in args:
            empty = self.empty_args
            args = [empty if a is None else a for a in args]
        return args


def decode_raw(value: Any) -> Any:
    """A field the fast path kept undecoded (``msgspec.Raw``) as a Python value; dict-path values
    pass through. None when absent or not valid JSON."""
    if msgspec is not None and isinstance(value, msgspec.Raw):
        if not len(value):
            return None
        try:
            return msgspec.json.decode(value)
        except msgspec.DecodeError:
            return None
    return value


@dataclass
class KinetoFile:
    """One decoded file: its events and the header keys the reader uses."""

    path: Path
    events: list
    rows: EventFields
    header: dict[str, Any] = field(default_factory=dict)
    raw_bytes: int = 0


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Millions of new containers trigger quadratic-ish GC passes; none of them form cycles."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_bytes(path: Path) -> bytes:
    """The file's JSON text, gunzipped if needed. Opened read-only; errors name the problem."""
    regular_file(path)  # a FIFO would block the read below
    try:
        with path.open("rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise TraceError(f"cannot read: {exc.strerror or exc}", path) from None
    if not data:
        raise TraceError("empty file", path)
    if data[:2] == GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except EOFError:
            raise TraceError(
                "truncated gzip: the file ends before the end of the compressed stream", path
            ) from None
        except (gzip.BadGzipFile, zlib.error, OSError) as exc:
            raise TraceError(f"corrupt gzip: {exc}", path) from None
    return data


TOO_DEEP = (
    "corrupt JSON: values nested too deeply to read (no profiler writes such nesting; Python's"
    " recursion limit reached)"
)


def _not_a_trace(path: Path, why: str) -> TraceError:
    return TraceError(f"not a PyTorch-profiler trace: {why}", path)


def _decode_structs(path: Path, data: bytes) -> KinetoFile | None:
    """The fast path; None when the file's value types need the generic parse."""
    try:
        with _gc_paused():
            doc = _DECODER.decode(data)
    except msgspec.ValidationError:
        return None
    except msgspec.DecodeError as exc:
        raise TraceError(f"corrupt JSON: {_json_problem(str(exc))}", path) from None
    except RecursionError:
        raise TraceError(TOO_DEEP, path) from None
    if isinstance(doc, list):
        return KinetoFile(path, doc, EventFields(structs=True), {}, len(data))
    if doc.traceEvents is None:
        raise _not_a_trace(path, "no 'traceEvents' list in the JSON object")
    header = {key: getattr(doc, key) for key in HEADER_KEYS}
    return KinetoFile(path, doc.traceEvents, EventFields(structs=True), header, len(data))


def _decode_dicts(path: Path, data: bytes) -> KinetoFile:
    try:
        import orjson

        loads, errors = orjson.loads, (orjson.JSONDecodeError,)
    except ImportError:  # pragma: no cover
        import json

        loads, errors = json.loads, (ValueError,)
    try:
        with _gc_paused():
            doc = loads(data)
    except errors as exc:
        raise TraceError(f"corrupt JSON: {_json_problem(str(exc))}", path) from None
    except RecursionError:
        raise TraceError(TOO_DEEP, path) from None
    if isinstance(doc, list):
        events, header = doc, {}
    elif isinstance(doc, dict):
        events = doc.get("traceEvents")
        if not isinstance(events, list):
            raise _not_a_trace(path, "no 'traceEvents' list in the JSON object")
        header = {key: doc.get(key) for key in HEADER_KEYS}
    else:
        raise _not_a_trace(path, f"the JSON document is a {type(doc).__name__}, not an object")
    if not all(type(e) is dict for e in events):
        raise _not_a_trace(path, "the event list holds values that are not JSON objects")
    return KinetoFile(path, events, EventFields(structs=False), header, len(data))


def _json_problem(message: str) -> str:
    message = message.strip().splitlines()[0] if message.strip() else "malformed"
    lowered = message.lower()
    if "truncated" in lowered or "end of data" in lowered or "eof" in lowered:
        return "the JSON text ends early (truncated file?)"
    return message


def decode_file(path: Path, *, fast: bool = True) -> KinetoFile:
    """Read and decode one Kineto file. ``fast=False`` forces the generic dict parse."""
    data = read_bytes(path)
    head = data[:4096].lstrip()
    if not head.startswith((b"{", b"[")):
        raise _not_a_trace(path, "the file is not JSON (it does not start with '{' or '[')")
    if fast and msgspec is not None:
        decoded = _decode_structs(path, data)
        if decoded is not None:
            return decoded
    return _decode_dicts(path, data)
