"""Read the number a person types into a widget, safely.

:func:`parse_value` accepts what one would type at a Python prompt for a number -- float and
int literals (``3.141``, ``1e-5``, ``0x3c00``, ``1_000``), ``inf`` / ``nan`` / ``pi``, and
arithmetic on them (``2**-24``, ``-1/3``, ``(1 + 2**-10) * 2**15``) -- and nothing else. The
text is parsed with :mod:`ast` and only numbers, names from a fixed table and the operators
``+ - * / **`` are evaluated: no names, calls, attributes or subscripts are ever looked up, so
no code runs, and powers whose result could not fit a float64 are refused before they are
computed (``9**9**9`` would otherwise take the machine's memory).

>>> parse_value("2**-24")
5.960464477539063e-08
>>> parse_value(" -inf "), parse_value("-0")
(-inf, -0.0)
>>> parse_value("__import__('os')")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: cannot read "__import__('os')" as a number: calls are not allowed. Type a number ...
"""

from __future__ import annotations

import ast
import math
import operator
import re
import warnings
from typing import Any

__all__ = ["parse_value"]

_MAX_LENGTH = 200
_HINT = "Type a number such as 3.141, 2**-24, -1/3, inf or nan."
_NAMES = {
    "inf": math.inf, "infinity": math.inf, "nan": math.nan, "pi": math.pi, "tau": math.tau,
}
_BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
# Nodes a person might type that are not numbers, named for the error message.
_REFUSED = {
    ast.Call: "calls", ast.Attribute: "attributes", ast.Subscript: "subscripts",
    ast.Compare: "comparisons", ast.BoolOp: "boolean operators", ast.Lambda: "lambdas",
    ast.List: "lists", ast.Tuple: "tuples", ast.Dict: "dicts", ast.Set: "sets",
}
_FLOAT64_MAX_EXPONENT = 1024  # |x| >= 2**1024 is beyond float64's max
_TOO_LARGE = "it is beyond float64's range (max ≈ 1.8e308): type inf for infinity"
_TOO_SMALL = ("it is nonzero but below float64's smallest subnormal (≈ 4.9e-324), so it would "
              "be read as 0: type 0 for zero")


class _Refused(ValueError):
    """The reason a piece of the expression is not accepted (becomes the message)."""


def parse_value(text: Any) -> float:
    """The float64 a text such as ``"3.141"``, ``"2**-24"``, ``"inf"`` or ``"-1/3"`` stands for.

    Evaluates like Python would (``1/3`` is float division, ``2**-24`` is exact) but accepts
    only numbers and ``+ - * / **``; anything else raises a ``ValueError`` that says what was
    wrong and what to type. Integers must be exact in float64 (``2**53 + 1`` is refused: type
    ``2.0**53 + 1`` to accept the rounding), results beyond float64's range are refused
    (``2**1024``; type ``inf`` for infinity), and so are nonzero numbers below its smallest
    subnormal (``1e-400``, ``2**-1075``: float64 would read them as 0, and a toy rounding up
    would then show 0 where the smallest subnormal is the answer).

    >>> parse_value("3.141"), parse_value("1/3"), parse_value("nan")
    (3.141, 0.3333333333333333, nan)
    >>> parse_value("1e400")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: cannot read '1e400' as a number: it is beyond float64's range ... type inf ...
    """
    if not isinstance(text, str):
        raise TypeError(f"expected the text of a number (a str), got {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise ValueError(f"the value is empty. {_HINT}")
    if len(stripped) > _MAX_LENGTH:
        raise ValueError(f"the value is {len(stripped)} characters long; at most "
                         f"{_MAX_LENGTH} are read. {_HINT}")
    try:
        return _to_float64(_read(stripped), stripped)
    except _Refused as why:
        advice = "" if "type " in str(why) else f" {_HINT}"
        raise ValueError(f"cannot read {stripped!r} as a number: {why}.{advice}") from None


def _read(text: str) -> int | float:
    try:  # plain literals first: float() reads "-0" as -0.0 (Python's -0 is the int 0)
        return _check_literal(float(text), text)
    except ValueError:
        pass
    source = text.replace("−", "-")  # a pasted minus sign
    try:
        with warnings.catch_warnings():  # "1if 1 else 2": Python's SyntaxWarning is no answer
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(source, mode="eval")
    except SyntaxError:
        raise _Refused("it is not a Python expression") from None
    return _evaluate(tree.body, source)


def _check_literal(value: float, literal: str) -> float:
    """``value`` read from ``literal``, refused if a nonzero literal underflowed to 0 (1e-400:
    a toy rounding up, or a format wider than float64, would then show the wrong number)."""
    if value == 0 and re.search(r"[1-9]", re.split(r"[eE]", literal.lower().lstrip("+-"))[0]):
        raise _Refused(_TOO_SMALL)
    return value


def _to_float64(result: int | float, text: str) -> float:
    if isinstance(result, int):
        if result.bit_length() > _FLOAT64_MAX_EXPONENT:
            raise _Refused(_TOO_LARGE)
        if abs(result) > 2**53 and float(result) != result:
            raise _Refused(
                f"the integer {result} is not exact in float64 (it would round to "
                f"{float(result)!r}): type it as a float, e.g. {float(result)!r}, to accept that"
            )
        return float(result)
    if math.isinf(result) and "inf" not in text.lower():  # 1e400, 1e308 * 10: not typed as inf
        raise _Refused(_TOO_LARGE)
    return float(result)


def _evaluate(node: ast.AST, source: str) -> int | float:
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, complex):
            raise _Refused("complex numbers are not allowed (formats hold real numbers)")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _Refused(f"{value!r} ({type(value).__name__}) is not a number")
        if isinstance(value, int) and value.bit_length() > _FLOAT64_MAX_EXPONENT + 64:
            raise _Refused(_TOO_LARGE)
        if isinstance(value, float):  # 1e-400 is already 0.0 here: read its text
            _check_literal(value, ast.get_source_segment(source, node) or "0")
        return value
    if isinstance(node, ast.Name):
        if node.id.lower() in _NAMES:
            return _NAMES[node.id.lower()]
        raise _Refused(f"{node.id!r} is not a number (names allowed: {', '.join(_NAMES)})")
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand, source))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left, source), _evaluate(node.right, source)
        if isinstance(node.op, ast.Pow):
            result = _power(left, right)
        elif isinstance(node.op, ast.Div) and right == 0:
            raise _Refused("division by zero")
        else:
            try:
                result = _BINARY[type(node.op)](left, right)
            except OverflowError:
                raise _Refused(_TOO_LARGE) from None
        # A product, quotient or power of nonzero finite numbers is nonzero: 0 means it
        # underflowed float64 (2**-1075, 1e-200 * 1e-200). A sum of 0 is exact (x - x).
        if (result == 0 and not isinstance(node.op, (ast.Add, ast.Sub))
                and all(v != 0 and math.isfinite(v) for v in (left, right))):
            raise _Refused(_TOO_SMALL)
        return result
    for kind, words in _REFUSED.items():
        if isinstance(node, kind):
            raise _Refused(f"{words} are not allowed")
    if isinstance(node, (ast.BinOp, ast.UnaryOp)):
        raise _Refused("only the operators + - * / ** are allowed")
    raise _Refused(f"{type(node).__name__} expressions are not allowed")


def _power(base: int | float, exponent: int | float) -> int | float:
    """``base ** exponent``, refusing results too large to compute or to hold in float64."""
    if base == 0 and exponent < 0:
        raise _Refused("0 to a negative power is a division by zero")
    if base < 0 and not float(exponent).is_integer():
        raise _Refused("a negative number to a fractional power is complex")
    magnitude = abs(base)
    if math.isfinite(magnitude) and math.isfinite(exponent) and magnitude not in (0, 1):
        # log2 of the result's magnitude: beyond +-1100 it cannot be a float64 (and an int
        # power that large could take unbounded time and memory to compute).
        size = exponent * math.log2(magnitude)
        if size > _FLOAT64_MAX_EXPONENT + 64:
            raise _Refused(_TOO_LARGE)
    try:
        return base**exponent
    except OverflowError:
        raise _Refused(_TOO_LARGE) from None
