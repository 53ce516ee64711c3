"""Small expressions over a hooked call's arguments, for tagged hooks (``--hook``, preset TOML):
range attributes (``tokens=arg0.shape[-1]``) and conditions (``when=arg0.shape[-1] > 1``).

Parsed with ``ast`` once and turned into closures; never ``eval``. What an expression may use:

* ``arg0``, ``arg1``, ...: arguments by position (a method's ``self`` not counted), whether passed
  positionally or by keyword; a parameter's name (``input_ids``, ``self``); both work on a
  ``torch.compile`` result, whose own signature is ``*args, **kwargs``;
* attributes (``.shape``, ``.config.num_heads``; none starting with ``_``), subscripts with
  constant indices or slices (``[-1]``, ``[0]``, ``["key"]``), ``len()``, ``min()``, ``max()``,
  ``abs()``;
* numbers, strings, ``True``/``False``/``None``, tuples of constants (``in (4, 5)``),
  ``+ - * / // %``, comparisons, ``and or not``, ``a if cond else b``.

Values compared, computed or put in a range text must be plain Python scalars (ints, floats,
strings, bools, None; a shape's entries are ints): a tensor there would synchronise with the GPU,
so it makes the expression fail instead. A failing condition means the rule does not apply; a
failing attribute is left out of the range text.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from verifyprof.capture.hooks.extractors import Call

Fn = Callable[[Call], Any]
_PLAIN = (int, float, str, bool, type(None))
_ARG = re.compile(r"^arg(\d+)$")
_FUNCTIONS: dict[str, Callable[..., Any]] = {"len": len, "min": min, "max": max, "abs": abs}
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}


class ExpressionError(ValueError):
    """An expression outside the small language above (the message says which part)."""


def _plain(value: Any) -> Any:
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, tuple) and all(isinstance(v, _PLAIN) for v in value):  # a torch.Size
        return value
    raise TypeError(f"{type(value).__name__} is not a plain value (a tensor would synchronise)")


def _name(node: ast.Name) -> Fn:
    match = _ARG.match(node.id)
    if match:
        n = int(match.group(1))
        return lambda call: call.positional(n)
    if node.id in _FUNCTIONS:
        raise ExpressionError(f"{node.id} is a function: call it, e.g. {node.id}(arg0)")
    name = node.id
    return lambda call: call.arg(name)


def _subscript(node: ast.Subscript) -> Fn:
    value = _build(node.value)
    index = node.slice
    if isinstance(index, ast.Slice):
        parts = [
            None if p is None else _constant(p) for p in (index.lower, index.upper, index.step)
        ]
        key: Any = slice(*parts)
    else:
        key = _constant(index)
    return lambda call: value(call)[key]


def _constant(node: ast.AST) -> Any:
    """A constant index: a number, a negative number, or a string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, str)):
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
    ):
        return -node.operand.value
    raise ExpressionError(
        f"index {ast.unparse(node)!r} must be a constant (e.g. [-1], [0], ['key'])"
    )


def _call(node: ast.Call) -> Fn:
    if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS or node.keywords:
        raise ExpressionError(
            f"call {ast.unparse(node)!r}: only {', '.join(_FUNCTIONS)} may be called"
        )
    function = _FUNCTIONS[node.func.id]
    args = [_build(a) for a in node.args]
    return lambda call: _plain(function(*[a(call) for a in args]))


def _compare(node: ast.Compare) -> Fn:
    left = _build(node.left)
    steps = [(_COMPARE[type(op)], _build(right)) for op, right in zip(node.ops, node.comparators)]

    def compare(call: Call) -> bool:
        a = _plain(left(call))
        for op, right in steps:
            b = _plain(right(call))
            if not op(a, b):
                return False
            a = b
        return True

    return compare


def _bool_op(node: ast.BoolOp) -> Fn:
    parts = [_build(v) for v in node.values]
    if isinstance(node.op, ast.And):
        return lambda call: all(_plain(p(call)) for p in parts)
    return lambda call: any(_plain(p(call)) for p in parts)


def _unary(node: ast.UnaryOp) -> Fn:
    operand = _build(node.operand)
    if isinstance(node.op, ast.Not):
        return lambda call: not _plain(operand(call))
    if isinstance(node.op, ast.USub):
        return lambda call: -_plain(operand(call))
    raise ExpressionError(f"operator in {ast.unparse(node)!r} is not supported")


def _build(node: ast.AST) -> Fn:
    if isinstance(node, ast.Constant) and isinstance(node.value, _PLAIN):
        value = node.value
        return lambda call: value
    if isinstance(node, ast.Name):
        return _name(node)
    if isinstance(node, ast.Attribute):
        if node.attr.startswith("_"):
            raise ExpressionError(
                f"attribute {node.attr!r}: names starting with _ are not readable"
            )
        base, attr = _build(node.value), node.attr
        return lambda call: getattr(base(call), attr)
    if isinstance(node, ast.Subscript):
        return _subscript(node)
    if isinstance(node, ast.Call):
        return _call(node)
    if isinstance(node, ast.Compare):
        return _compare(node)
    if isinstance(node, ast.BoolOp):
        return _bool_op(node)
    if isinstance(node, ast.UnaryOp):
        return _unary(node)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        op, left, right = _BINARY[type(node.op)], _build(node.left), _build(node.right)
        return lambda call: op(_plain(left(call)), _plain(right(call)))
    if isinstance(node, (ast.Tuple, ast.List)):  # a constant set of choices: x in (4, 5)
        items = tuple(_constant(e) for e in node.elts)
        return lambda call: items
    if isinstance(node, ast.IfExp):
        test, body, orelse = _build(node.test), _build(node.body), _build(node.orelse)
        return lambda call: body(call) if _plain(test(call)) else orelse(call)
    raise ExpressionError(f"{ast.unparse(node)!r} is not supported in a hook expression")


@lru_cache(maxsize=512)
def value(text: str) -> Fn:
    """``text`` as a function of a :class:`Call` giving a plain value (the same object for the
    same text, so a spec installed twice adds no second rule)."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"{text!r} is not an expression: {exc.msg}") from None
    fn = _build(tree.body)
    return lambda call: _plain(fn(call))


@lru_cache(maxsize=512)
def condition(text: str) -> Callable[[Call], bool]:
    """``text`` as a predicate; a bare name must be a comparison (``flag == True``), so that a
    misspelt predicate name is an error rather than a condition that never holds."""
    if re.match(r"^\s*[A-Za-z_]\w*\s*$", text):
        raise ExpressionError(
            f"{text.strip()!r} is neither a known predicate nor a condition (write e.g."
            f" {text.strip()} == True)"
        )
    fn = value(text)
    return lambda call: bool(fn(call))


@lru_cache(maxsize=512)
def attributes(pairs: tuple[tuple[str, str], ...]) -> Callable[[Call], dict[str, object]]:
    """``((key, expression), ...)`` as an attribute extractor; a key whose expression fails, or
    whose value would not fit a range text (a tuple, a string with spaces), is left out."""
    compiled = [(key, value(text)) for key, text in pairs]

    def extract(call: Call) -> dict[str, object]:
        out: dict[str, object] = {}
        for key, fn in compiled:
            try:
                v = fn(call)
            except Exception:
                continue
            if isinstance(v, tuple) or (
                isinstance(v, str) and (not v or any(c.isspace() for c in v))
            ):
                continue
            out[key] = v
        return out

    return extract
