"""Kernel names as Nsight Systems shortens them, keeping the part that tells two kernels apart.

Nsight Systems records three names per kernel: the mangled one, the demangled signature (what
``nsys stats -r cuda_gpu_kern_sum`` lists by default) and the base name (``shortName`` in its
SQLite export, what ``cuda_gpu_kern_sum:base`` sums over): the function's own name, without
namespaces, return type, template arguments or parameter list. The base name of every PyTorch
elementwise kernel is ``elementwise_kernel``, though: what tells them apart is the functor in
the template arguments. So the short name here is the base name, followed by that functor when
there is one::

    void at::native::elementwise_kernel<(int)128, (int)4, void at::native::gpu_kernel_impl_nocast<
        at::native::BinaryFunctor<c10::BFloat16, ..., at::native::binary_internal::MulFunctor<
        float>>>(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)
    -> elementwise_kernel<…MulFunctor…>

The functor is the most deeply nested name in the template arguments that is either a class
named like one (``…Functor…``, ``…functor…``, ``…Op``, ``…Ops``) or a function a lambda is
defined in (``where_kernel_impl(…)::[lambda…]``); at equal depth the first. Template arguments
that are short and flat (no brackets once casts such as ``(int)`` are dropped, at most
``KEPT_ARGS`` characters) are kept whole, as they tell kernels apart by themselves:
``Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>``, ``multimem_all_reduce_kernel<
c10::BFloat16, 16>``. Names without C++ syntax (``nvjet_sm90_tst_...``, ``triton_poi_fused_0``)
pass through; one whose brackets never close comes back whole.

Console, ``--json`` (``short_name``) and the HTML report all call :func:`short_kernel_name`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

ELIDED = "…"
_ANONYMOUS = re.compile(r"\(anonymous namespace\)::|<unnamed>::|`anonymous namespace'::")
_CLOSE = {"<": ">", "(": ")", "[": "]", "{": "}"}
_OPERATOR = re.compile(r"operator\s*(\(\)|\[\])")  # a name, not brackets: masked
_MASK = str.maketrans("()[]", "\x01\x02\x03\x04")
_UNMASK = str.maketrans("\x01\x02\x03\x04", "()[]")
_NAME = re.compile(r"[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*")
_FUNCTOR = re.compile(r"[Ff]unctor|Ops?$")
_CASTS = re.compile(r"\((?:unsigned |signed )?(?:int|long|long long|short|char|bool|unsigned)\)")
KEPT_ARGS = 48  # template arguments this short, and flat, are kept whole
_LAMBDA_AFTER = re.compile(r"\s*(?:const\s*)?::\[lambda")


def _spans(text: str) -> tuple[list[int], int] | None:
    """The bracket depth before each character, and where the top-level parameter list opens
    (len(text) when none); None when a bracket never closes."""
    depth, stack, opened = [], [], len(text)
    for i, ch in enumerate(text):  # per character of one name: names are few (distinct ones)
        depth.append(len(stack))
        if stack and ch == _CLOSE[stack[-1]]:
            stack.pop()
        elif ch in _CLOSE:
            if not stack and ch == "(" and opened == len(text):
                opened = i
            stack.append(ch)
    return (depth, opened) if not stack else None


def _base(head: str, depth: list[int]) -> str:
    """The function's own name from the text before its parameter list: no return type, no
    namespaces, no template arguments (an ``operator()`` keeps its class)."""
    top = "".join(ch for ch, d in zip(head, depth) if d == 0 and ch not in _CLOSE)
    words = top.split()
    qualified = words[-1] if words else head
    parts = [p for p in qualified.split("::") if p]
    if len(parts) >= 2 and parts[-1].startswith("operator"):
        return "::".join(parts[-2:])
    return parts[-1] if parts else qualified


def _functor(args: str, depth: list[int]) -> str | None:
    """The name that tells the kernel apart, from its template arguments (see the module)."""
    best: tuple[int, str] | None = None
    for match in _NAME.finditer(args):
        own = match.group().rsplit("::", 1)[-1]
        after = args[match.end() : match.end() + 1]
        if own in ("operator", "lambda", "const", "void") or after not in ("<", "("):
            continue
        lambda_owner = _closes_into_lambda(args, _past_template(args, match.end()))
        if not (lambda_owner or (after == "<" and _FUNCTOR.search(own))):
            continue
        if best is None or depth[match.start()] > best[0]:
            best = (depth[match.start()], own)
    return best[1] if best else None


def _past_template(text: str, at: int) -> int:
    """Past the template arguments that open at ``at`` (``at`` itself when none open there)."""
    level = 0
    for i in range(at, len(text)):
        level += {"<": 1, ">": -1}.get(text[i], 0)
        if level == 0:
            return i + 1 if i > at or text[at] == "<" else at
    return at


def _closes_into_lambda(text: str, opened: int) -> bool:
    """Whether a parenthesis at ``opened`` closes into ``::[lambda``: a lambda's function."""
    if text[opened : opened + 1] != "(":
        return False
    level = 0
    for i in range(opened, len(text)):
        level += {"(": 1, ")": -1}.get(text[i], 0)
        if level == 0:
            return bool(_LAMBDA_AFTER.match(text, i + 1))
    return False


def short_kernel_name(name: str) -> str:
    """``name`` shortened as the module says."""
    text = _ANONYMOUS.sub("", name).strip()
    text = _OPERATOR.sub(lambda m: "operator" + m.group(1).translate(_MASK), text)
    found = _spans(text)
    if found is None:
        return name
    depth, opened = found
    head = text[:opened].rstrip()
    base = _base(head, depth).translate(_UNMASK) or name
    if not head.endswith(">"):
        return base
    start = max(i for i, ch in enumerate(head) if ch == "<" and depth[i] == 0)
    args = _CASTS.sub("", head[start + 1 : -1]).strip()
    if len(args) <= KEPT_ARGS and not any(ch in _CLOSE for ch in args):
        return f"{base}<{args.translate(_UNMASK)}>"  # short and flat: every argument tells
    functor = _functor(head[start + 1 : -1], depth[start + 1 :])
    return f"{base}<{ELIDED}{functor}{ELIDED}>" if functor else base


def short_names(names: Iterable[str]) -> np.ndarray:
    """:func:`short_kernel_name` of many names, each distinct name shortened once."""
    values = np.asarray(list(names), dtype=object)
    if not len(values):
        return values
    unique, inverse = np.unique(values.astype(str), return_inverse=True)
    return np.asarray([short_kernel_name(str(n)) for n in unique], dtype=object)[inverse]
