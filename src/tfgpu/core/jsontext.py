"""JSON text as ``json.dumps(obj, indent=2)`` writes it, byte for byte, in half the time.

With ``indent`` the standard library encodes in pure Python through nested generators (its C encoder ignores
indentation); for the doctor's document (90-130 kB) that was ~2 ms of every `tfgpu doctor --json`. Here one
recursive function appends to a list and the standard library's C functions still encode every string.
Anything this does not handle the standard way (a type json cannot encode, a circular reference) is passed to
``json.dumps`` itself, so its answer and its errors are the standard ones (tests/unit/core/test_jsontext.py
compares both on the casebook's documents and on generated values).
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring, encode_basestring_ascii

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

_INFINITY = float("inf")


class _Unusual(Exception):
    """A value json.dumps must judge itself."""


def _float(o: float) -> str:
    if o != o:
        return "NaN"
    if o == _INFINITY:
        return "Infinity"
    if o == -_INFINITY:
        return "-Infinity"
    return float.__repr__(o)


def _key(k: object) -> str:
    """A dict key as json turns it into a string."""
    if isinstance(k, str):
        return k
    if isinstance(k, float):
        return _float(k)
    if k is True:
        return "true"
    if k is False:
        return "false"
    if k is None:
        return "null"
    if isinstance(k, int):
        return int.__repr__(k)
    raise _Unusual


def dumps_indented(obj: object, *, ensure_ascii: bool = True) -> str:
    """``json.dumps(obj, indent=2, ensure_ascii=ensure_ascii)``."""
    enc: Callable[[str], str] = encode_basestring_ascii if ensure_ascii else encode_basestring
    parts: list[str] = []
    add = parts.append

    def value(o: object, nl: str) -> None:
        t = type(o)
        if t is str:
            add(enc(o))  # type: ignore[arg-type]
        elif t is dict:
            if not o:
                add("{}")
                return
            inner = nl + "  "
            sep = "{" + inner
            for k, v in o.items():  # type: ignore[attr-defined]
                add(sep)
                add(enc(k if type(k) is str else _key(k)))
                add(": ")
                value(v, inner)
                sep = "," + inner
            add(nl + "}")
        elif t is list or t is tuple:
            if not o:
                add("[]")
                return
            inner = nl + "  "
            sep = "[" + inner
            for v in o:  # type: ignore[attr-defined]
                add(sep)
                value(v, inner)
                sep = "," + inner
            add(nl + "]")
        elif o is None:
            add("null")
        elif o is True:
            add("true")
        elif o is False:
            add("false")
        elif t is int:
            add(int.__repr__(o))
        elif t is float:
            add(_float(o))  # type: ignore[arg-type]
        else:
            subclass(o, nl)

    def subclass(o: object, nl: str) -> None:
        # as json's encoder tests them: a str, int or float subclass (an enum) is written as its base type
        if isinstance(o, str):
            add(enc(o))
        elif isinstance(o, int):
            add(int.__repr__(o))
        elif isinstance(o, float):
            add(_float(o))
        elif isinstance(o, (list, tuple)):
            value(list(o), nl)
        elif isinstance(o, dict):
            value(dict(o), nl)
        else:
            raise _Unusual

    try:
        value(obj, "\n")
    except (_Unusual, RecursionError):  # json.dumps raises its own error (or, for a subclass, writes it its way)
        return json.dumps(obj, indent=2, ensure_ascii=ensure_ascii)
    return "".join(parts)
