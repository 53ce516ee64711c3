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
``KEPT_ARGS`` characters, namespaces dropped where that makes them fit) are kept whole, as they
tell kernels apart by themselves:
``Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>``, ``multimem_all_reduce_kernel<
c10::BFloat16, 16>``; so is one flat argument that is a single word of at most ``KEPT_WORD``
characters, a configuration's name:
``Kernel<cutlass_tensorop_s1688dgrad_optimized_tf32_64x256_32x4_nhwc_align4>``. Without a
functor, nested template arguments that are short once namespaces and casts are dropped are
kept so: ``CatArrayBatchedCopy_aligned16_contig<OpaqueType<4u>, unsigned int, 1, 128, 1>``.
A generic base name (``Kernel``, ``Kernel2``, ``kernel``, ``device_kernel``)
tells nothing by itself, and no functor is looked for in its arguments (CUTLASS's
``MmaTensorOp`` would name them all alike); when neither rule above applies it keeps the first
template in its arguments and the first template whose own arguments are flat (a tile shape,
typically)::

    void cutlass_cudnn_train::Kernel<cutlass_cudnn_train::conv::kernel::ImplicitGemmConvolution<
        cutlass_cudnn_train::conv::threadblock::ImplicitGemmMultistage<cutlass_cudnn_train::gemm::
        GemmShape<128, 128, 32>, ...>, ...>>(...::Params)
    -> Kernel<…ImplicitGemmConvolution…GemmShape<128, 128, 32>…>

Each rule reads the one name only, so a name is shortened the same wherever it is shown.
Lambdas count in either demangler's spelling (``[lambda(int) (instance 1)]``, ``{lambda(int)#1}``).
A mangled Itanium name (``_Z…``, as some Kineto traces record cuDNN's kernels) is demangled first,
with binutils' ``c++filt`` when it is on the PATH (one call per table, see :func:`short_names`);
without it, a readable short form is read from the mangled name itself (:func:`mangled_short_name`):
the nested name's last identifier, and for a generic one the first template argument's last
identifier and the first template of integer arguments (on CUTLASS's kernels the same short name
as the demangled one's). Names without C++ syntax (``nvjet_sm90_tst_...``, ``triton_poi_fused_0``)
pass through; one whose brackets never close comes back whole.

Console, ``--json`` (``short_name``) and the HTML report all call :func:`short_kernel_name`.
"""

from __future__ import annotations

import re
import shutil
import subprocess
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
KEPT_ARGS = 64  # template arguments this short, and flat, are kept whole
KEPT_WORD = 96  # and one word this short (CUTLASS's configurations are up to about 85)
_LAMBDA_AFTER = re.compile(r"\s*(?:const\s*)?::[\[{]lambda")
_GENERIC = re.compile(r"(?:[Kk]ernel|device_kernel)\d*")  # base names that tell nothing
_NAMESPACES = re.compile(r"\b(?:[A-Za-z_]\w*::)+")
_FLAT_TEMPLATE = re.compile(r"([A-Za-z_]\w*)<([^<>()\[\]{}]*)>")
_DEMANGLED: dict[str, str | None] = {}  # mangled name -> c++filt's demangling (None: it failed)


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
    full = name
    if name.startswith("_Z"):
        full = _demangled(name) or ""
        if not full:
            return mangled_short_name(name)
    text = _ANONYMOUS.sub("", full).strip()
    text = _OPERATOR.sub(lambda m: "operator" + m.group(1).translate(_MASK), text)
    found = _spans(text)
    if found is None:
        return full
    depth, opened = found
    head = text[:opened].rstrip()
    base = _base(head, depth).translate(_UNMASK) or full
    if not head.endswith(">"):
        return base
    start = max(i for i, ch in enumerate(head) if ch == "<" and depth[i] == 0)
    args = _CASTS.sub("", head[start + 1 : -1]).strip()
    if not any(ch in _CLOSE for ch in args):  # flat: kept when short, or one word
        kept = args if len(args) <= KEPT_ARGS else _NAMESPACES.sub("", args)
        if len(kept) <= KEPT_ARGS or (len(args) <= KEPT_WORD and _NAME.fullmatch(args)):
            return f"{base}<{kept.translate(_UNMASK)}>"
    functor = (
        None if _GENERIC.fullmatch(base) else _functor(head[start + 1 : -1], depth[start + 1 :])
    )
    if functor:
        return f"{base}<{ELIDED}{functor}{ELIDED}>"
    return _without_functor(base, args).translate(_UNMASK)


def _without_functor(base: str, args: str) -> str:
    """Nested template arguments without a functor: kept without namespaces when short; of a
    generic base name, its first template and first template of flat arguments (the module)."""
    compact = _NAMESPACES.sub("", args)
    if len(compact) <= KEPT_ARGS:
        return f"{base}<{compact}>"
    if not _GENERIC.fullmatch(base):
        return base
    outer = re.search(r"([A-Za-z_]\w*)<", compact)
    inner = _FLAT_TEMPLATE.search(compact)
    return _generic_short(base, outer.group(1) if outer else None, inner.group() if inner else None)


def _generic_short(base: str, outer: str | None, inner: str | None) -> str:
    """``Kernel<…Outer…Inner<flat>…>``, each part only when there is one and once."""
    parts = [outer] if outer and not (inner or "").startswith(outer + "<") else []
    parts += [inner] if inner else []
    return f"{base}<{ELIDED}{ELIDED.join(parts)}{ELIDED}>" if parts else base


_MANGLED_LITERAL = re.compile(r"L([a-z])(n?)(\d+)E")
_MANGLED_SKIP = re.compile(r"[ST][0-9A-Z]*_|S[abdiost]")  # substitutions, template parameters
_MANGLED_LENGTH = re.compile(r"\d+")
_LITERAL_SUFFIX = {"j": "u", "l": "l", "m": "ul", "x": "ll", "y": "ull"}


def _mangled_tokens(name: str) -> list[tuple[str, str]]:
    """A mangled name's identifiers (``id``), literals (``lit``) and other codes, in order."""
    tokens, i = [], 2
    while i < len(name):  # per character of one name: names are few (distinct mangled ones)
        if literal := _MANGLED_LITERAL.match(name, i):
            kind, minus, digits = literal.groups()
            text = minus.replace("n", "-") + digits + _LITERAL_SUFFIX.get(kind, "")
            boolean = kind == "b" and digits in ("0", "1")
            tokens.append(("lit", ("false", "true")[int(digits)] if boolean else text))
            i = literal.end()
        elif skip := _MANGLED_SKIP.match(name, i):
            i = skip.end()
        elif length := _MANGLED_LENGTH.match(name, i):
            size = int(length.group())
            tokens.append(("id", name[length.end() : length.end() + size]))
            i = length.end() + size
        else:
            tokens.append((name[i], ""))
            i += 1
    return tokens


def mangled_short_name(name: str) -> str:
    """The short name read from a mangled name itself, when no demangler is there: the nested
    name's last identifier; of a generic one, also its first template argument's last identifier
    and the first template of integer arguments."""
    tokens = _mangled_tokens(name)
    opens = [i for i, (kind, _) in enumerate(tokens) if kind == "I"]
    ids = [text for kind, text in tokens[: opens[0] if opens else len(tokens)] if kind == "id"]
    base = ids[-1] if ids else name
    if not _GENERIC.fullmatch(base) or len(opens) < 2:
        return base
    first = [text for kind, text in tokens[opens[0] : opens[1]] if kind == "id"]
    inner = None
    for i in opens:
        values = []
        for kind, text in tokens[i + 1 :]:
            if kind != "lit":
                break
            values.append(text)
        closed = tokens[i + 1 + len(values) : i + 2 + len(values)] == [("E", "")]
        if values and closed and tokens[i - 1][0] == "id":
            inner = f"{tokens[i - 1][1]}<{', '.join(values)}>"
            break
    return _generic_short(base, first[-1] if first else None, inner)


def _demangled(name: str) -> str | None:
    """c++filt's demangling of one mangled name (None without c++filt, or where it fails)."""
    if name not in _DEMANGLED:
        demangle([name])
    return _DEMANGLED.get(name)


def demangle(names: Iterable[str]) -> None:
    """Demangle the mangled names among ``names`` not seen yet, in one ``c++filt`` call."""
    todo = sorted({n for n in names if n.startswith("_Z") and n not in _DEMANGLED})
    todo = [n for n in todo if n.isprintable() and " " not in n]
    if not todo:
        return
    lines = _cxxfilt(todo) or [None] * len(todo)
    _DEMANGLED.update({n: (d if d and d != n else None) for n, d in zip(todo, lines)})


def _cxxfilt(names: list[str]) -> list[str] | None:
    """c++filt's output, a line per name; None where it is missing or fails (GNU's needs
    ``--no-recurse-limit`` for CUTLASS's deep templates; LLVM's does not know that option)."""
    tool = shutil.which("c++filt")
    for options in (["--no-recurse-limit"], []):
        if tool is None:
            return None
        try:
            done = subprocess.run(
                [tool, *options],
                input="\n".join(names) + "\n",
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        lines = done.stdout.splitlines()
        if len(lines) == len(names):
            return lines
    return None


def short_names(names: Iterable[str]) -> np.ndarray:
    """:func:`short_kernel_name` of many names, each distinct name shortened once (the mangled
    ones demangled in one ``c++filt`` call)."""
    values = np.asarray(list(names), dtype=object)
    if not len(values):
        return values
    unique, inverse = np.unique(values.astype(str), return_inverse=True)
    demangle(str(n) for n in unique)
    return np.asarray([short_kernel_name(str(n)) for n in unique], dtype=object)[inverse]
