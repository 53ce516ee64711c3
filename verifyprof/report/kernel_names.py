"""Kernel names as Nsight Systems shortens them: the qualified function name, without the return
type, template arguments or parameter list.

``void cutlass::Kernel<cutlass_80_tensorop_..._align8>(Params)`` -> ``cutlass::Kernel``. Many
kernels share a short name (every ``at::native::elementwise_kernel``): the report shows the short
one and keeps the full name on hover.
"""

from __future__ import annotations

import re

_ANONYMOUS = re.compile(r"\(anonymous namespace\)::|<unnamed>::|`anonymous namespace'::")
_CLOSE = {"<": ">", "(": ")", "[": "]", "{": "}"}
_OPERATOR_CALL = "operator()"
_PLACEHOLDER = "operator\x00"  # ``operator()`` is a name, not a parameter list


def short_kernel_name(name: str) -> str:
    """``name`` with template arguments (at every depth) and the parameter list elided, the return
    type (``void``: every kernel's) and anonymous namespaces dropped. A name without C++ syntax
    (``nvjet_sm90_tst_...``, ``triton_poi_fused_0``) passes through; one whose brackets never
    close comes back whole."""
    text = _ANONYMOUS.sub("", name).strip().replace(_OPERATOR_CALL, _PLACEHOLDER)
    kept: list[str] = []
    stack: list[str] = []
    for ch in text:  # per character of one name, for display only
        if stack:
            if ch == _CLOSE[stack[-1]]:
                stack.pop()
            elif ch in _CLOSE:
                stack.append(ch)
        elif ch == "(":
            break  # the parameter list
        elif ch in _CLOSE:
            stack.append(ch)  # template arguments (or brackets) at the top level: elided
        else:
            kept.append(ch)
    else:
        if stack:
            return name  # brackets that never close: not a signature
    short = "".join(kept).strip().removeprefix("void ")  # a kernel returns void
    short = short.replace(_PLACEHOLDER, _OPERATOR_CALL).strip(": ")
    return short or name
