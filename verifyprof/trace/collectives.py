"""Names and sizes of collective calls, shared by the readers and the comm analysis.

Traces spell one collective many ways: PyTorch's ``Collective name`` (``allreduce``,
``_allgather_base``, ``reduce_scatter_tensor_coalesced``), NCCL's API ranges (``ncclAllReduce``),
kernel names (``ncclDevKernel_AllGather_RING_LL``, ``multimem_all_reduce_kernel``). They all map to
one family here, so that message sizes from args and times from kernels meet under one key.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from verifyprof.trace.events import COLLECTIVE_ARG_COLUMNS, NO_ID, StringTable

# Longest spellings first: "reduce_scatter" before "reduce", "all_reduce" before "reduce".
_FAMILY = re.compile(
    r"(all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast|bcast|send_?recv|reduce|send|recv)",
    re.IGNORECASE,
)
_CANONICAL = {"bcast": "broadcast"}

# PyTorch ScalarType names (``dtype`` arg: "Float", "BFloat16") and C++ type names of
# ``Input type`` ("float", "c10::BFloat16", "long int"), lower-cased, "c10::" dropped.
DTYPE_BYTES: dict[str, int] = {
    "float": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "byte": 1,
    "char": 1,
    "bool": 1,
    "uint8": 1,
    "int8": 1,
    "unsigned char": 1,
    "signed char": 1,
    "short": 2,
    "short int": 2,
    "int16": 2,
    "uint16": 2,
    "unsigned short": 2,
    "int": 4,
    "int32": 4,
    "uint32": 4,
    "unsigned int": 4,
    "long": 8,
    "long int": 8,
    "long long": 8,
    "int64": 8,
    "uint64": 8,
    "unsigned long": 8,
    "complexhalf": 4,
    "complexfloat": 8,
    "complexdouble": 16,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1,
    "float8_e8m0fnu": 1,
    "float4_e2m1fn_x2": 1,
    "qint8": 1,
    "quint8": 1,
    "qint32": 4,
}


def family(name: str) -> str:
    """The collective a call or kernel name performs (``"other"`` if none is named)."""
    match = _FAMILY.search(name)
    if not match:
        return "other"
    key = match.group(1).lower().replace("_", "")
    return _CANONICAL.get(key, key)


def dtype_bytes(name: object) -> int:
    """Bytes per element of a dtype name, -1 if unknown."""
    if not isinstance(name, str):
        return NO_ID
    key = name.strip().lower().removeprefix("c10::").removeprefix("torch.").removeprefix("at::")
    return DTYPE_BYTES.get(key, NO_ID)


def collective_args_table(
    kernel: np.ndarray,
    nbytes: np.ndarray,
    out_bytes: np.ndarray,
    group_size: np.ndarray,
    names: list[str] | np.ndarray,
    strings: StringTable,
) -> pd.DataFrame:
    """The model's ``collective_args`` table; ``names`` are the calls' own spellings (families
    stored)."""
    names = list(names)
    families = [family(n) if isinstance(n, str) and n else "" for n in names]
    ids = strings.intern(families) if families else np.empty(0, np.int32)
    ids = np.where(np.asarray(families, dtype=object) == "", NO_ID, ids) if families else ids
    frame = pd.DataFrame(
        {
            "kernel": np.asarray(kernel, dtype=np.int64),
            "bytes": np.asarray(nbytes, dtype=np.int64),
            "out_bytes": np.asarray(out_bytes, dtype=np.int64),
            "group_size": np.asarray(group_size, dtype=np.int32),
            "collective": np.asarray(ids, dtype=np.int32),
        },
        columns=list(COLLECTIVE_ARG_COLUMNS),
    )
    return frame.sort_values("kernel", kind="stable").reset_index(drop=True)
