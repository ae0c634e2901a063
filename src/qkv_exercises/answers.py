"""Answers as plain JSON: what crosses the wall between a student's notebook and the grader.

A submission runs in a sandbox; the grader outside it never unpickles or evaluates
anything that comes back. :func:`encode` turns a value from the notebook (a number, a
nested list, an array, a string, None, a function's result, even something
unexpected) into JSON-safe data with a tag per node, and :func:`decode` rebuilds a
value the checks can read: numbers, lists, tuples, strings, numpy arrays, and
:class:`Unreadable` for anything else (so a check can still say *what* the student
wrote). The grader also sends values in: the given inputs of a student's variant
and the arguments it calls a student's function with; :func:`call_student_function`
makes such a call the same way inside and outside the sandbox.

This module needs only the standard library and numpy: it runs inside the sandbox,
where nothing of the course but it is importable.

Limits keep a hostile value from costing memory: at most :data:`MAX_ENTRIES`
numbers in one array, :data:`MAX_ITEMS` items in one list, :data:`MAX_DEPTH` levels
of nesting and :data:`MAX_TEXT` characters of text; beyond them a value becomes
:class:`Unreadable` with the reason.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import reprlib
import traceback
import warnings
from dataclasses import dataclass

import numpy as np

MAX_ENTRIES = 1_000_000
MAX_ITEMS = 10_000
MAX_DEPTH = 8
MAX_TEXT = 2_000

_NUMBER_KINDS = "biuf"


@dataclass(frozen=True)
class Unreadable:
    """A value the grader cannot use as an answer: its type's name and a short repr."""

    type_name: str
    text: str

    def __repr__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Rng:
    """A random generator to pass to a student's function: ``np.random.default_rng(seed)``."""

    seed: int


def _number(x) -> float | int | str:
    """A JSON number, or 'nan' / 'inf' / '-inf' (JSON has no such numbers)."""
    if isinstance(x, (bool, np.bool_)):
        raise TypeError("booleans are encoded as 'bool'")
    if isinstance(x, (int, np.integer)):
        return int(x)
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _float(x) -> float:
    return float(x) if not isinstance(x, str) else float({"nan": "nan", "inf": "inf", "-inf": "-inf"}[x])


def _short_repr(value) -> str:
    short = reprlib.Repr()
    short.maxstring = short.maxother = 120
    try:
        return short.repr(value)[:200]
    except Exception:  # a hostile __repr__
        return f"<{type(value).__name__}>"


def encode(value, _depth: int = 0):
    """``value`` as tagged JSON-safe data (see the module docstring). Never raises."""
    try:
        return _encode(value, _depth)
    except Exception as err:  # a hostile __len__, __iter__, __array__ ...: say what it was, not why
        return {"t": "other", "type": type(value).__name__, "repr": f"<{type(value).__name__}: {type(err).__name__}>"}


def _encode(value, depth: int):
    if depth > MAX_DEPTH:
        return _other(value, "nested too deeply")
    if value is None:
        return {"t": "none"}
    if value is Ellipsis:
        return {"t": "ellipsis"}
    if isinstance(value, (bool, np.bool_)):
        return {"t": "bool", "v": bool(value)}
    if isinstance(value, (int, float, np.integer, np.floating)):
        return {"t": "num", "v": _number(value)}
    if isinstance(value, str):
        return {"t": "str", "v": value[:MAX_TEXT], "cut": len(value) > MAX_TEXT}
    if isinstance(value, Rng):
        return {"t": "rng", "seed": int(value.seed)}
    if isinstance(value, np.ndarray):
        return _encode_array(value, depth)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {"t": "record", "name": type(value).__name__, "fields": [str(f) for f in value._fields],
                "v": [_encode(v, depth + 1) for v in value]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # a qkv.Head, for example
        names = [f.name for f in dataclasses.fields(value)]
        return {"t": "record", "name": type(value).__name__, "fields": names,
                "v": [_encode(getattr(value, name), depth + 1) for name in names]}
    if isinstance(value, (list, tuple)):
        if len(value) > MAX_ITEMS:
            return _other(value, f"more than {MAX_ITEMS} items")
        return {"t": "list" if isinstance(value, list) else "tuple", "v": [_encode(v, depth + 1) for v in value]}
    if isinstance(value, dict):
        if len(value) > MAX_ITEMS:
            return _other(value, f"more than {MAX_ITEMS} items")
        return {"t": "dict", "v": [[_encode(k, depth + 1), _encode(v, depth + 1)] for k, v in value.items()]}
    if callable(value):
        return {"t": "function", "name": str(getattr(value, "__name__", type(value).__name__))[:100]}
    return _other(value)


def _encode_array(a: np.ndarray, depth: int):
    if a.size > MAX_ENTRIES:
        return _other(a, f"more than {MAX_ENTRIES} entries")
    if a.dtype.kind == "b":
        return {"t": "array", "dtype": "bool", "shape": list(a.shape), "v": [bool(x) for x in a.ravel()]}
    if a.dtype.kind in _NUMBER_KINDS:
        kind = "int" if a.dtype.kind in "iu" else "float"
        return {"t": "array", "dtype": kind, "shape": list(a.shape), "v": [_number(x) for x in a.ravel()]}
    if a.dtype.kind == "c":
        return _other(a, "complex numbers")
    return {"t": "list", "v": [_encode(v, depth + 1) for v in a.tolist()]} if a.ndim else _encode(a.item(), depth)


def _other(value, reason: str = ""):
    text = _short_repr(value) if not reason else f"<{type(value).__name__} with {reason}>"
    return {"t": "other", "type": type(value).__name__, "repr": text}


def N_(message: str) -> str:
    """Mark a message for the catalogue (this module runs in the sandbox, without the course's translations)."""
    return message


class MalformedAnswer(ValueError):
    """Data that :func:`encode` would never produce: the grader reports it and scores nothing from it.

    ``message`` (marked with :func:`N_`) names its fields, ``fields`` fills them: ``str()`` is the
    English, and the grader shows the message in the student's language.
    """

    def __init__(self, message: str, **fields):
        super().__init__(message.format(**fields))
        self.message, self.fields = message, fields


def decode(data, *, records=None, _depth: int = 0):
    """Rebuild a value from :func:`encode`'s data; raise :class:`MalformedAnswer` on anything else.

    ``records`` maps a record's name to the class to rebuild it with (for example
    ``{"Head": qkv.Head}``); without one, a record becomes a named tuple of that name.
    """
    if _depth > MAX_DEPTH + 1 or not isinstance(data, dict) or not isinstance(data.get("t"), str):
        raise MalformedAnswer(N_("not an encoded answer"))
    tag = data["t"]
    inner = lambda v: decode(v, records=records, _depth=_depth + 1)  # noqa: E731
    if tag == "none":
        return None
    if tag == "ellipsis":
        return Ellipsis
    if tag == "bool":
        return bool(_field(data, "v", bool))
    if tag == "num":
        return _checked_number(data.get("v"))
    if tag == "str":
        return str(_field(data, "v", str))[:MAX_TEXT]
    if tag == "rng":
        return np.random.default_rng(int(_field(data, "seed", int)))
    if tag == "array":
        return _decode_array(data)
    if tag in ("list", "tuple"):
        items = _field(data, "v", list)
        if len(items) > MAX_ITEMS:
            raise MalformedAnswer(N_("too many items"))
        decoded = [inner(v) for v in items]
        return decoded if tag == "list" else tuple(decoded)
    if tag == "record":
        name, fields, items = _field(data, "name", str), _field(data, "fields", list), _field(data, "v", list)
        if len(fields) != len(items) or not all(isinstance(f, str) and f.isidentifier() for f in fields):
            raise MalformedAnswer(N_("a record's fields do not match its values"))
        values = [inner(v) for v in items]
        if records and name in records:
            return records[name](*values)
        if not name.isidentifier():
            raise MalformedAnswer(N_("a record's name is not an identifier"))
        return collections.namedtuple(name, fields)(*values)
    if tag == "dict":
        pairs = _field(data, "v", list)
        if len(pairs) > MAX_ITEMS or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
            raise MalformedAnswer(N_("a dict's items are not pairs"))
        result = {}
        for k, v in pairs:
            key = inner(k)
            result[key if isinstance(key, (str, int, float, bool, type(None), tuple)) else repr(key)] = inner(v)
        return result
    if tag == "function":
        return Unreadable("function", f"<function {str(_field(data, 'name', str))[:100]}>")
    if tag == "other":
        return Unreadable(str(_field(data, "type", str))[:100], str(_field(data, "repr", str))[:MAX_TEXT])
    raise MalformedAnswer(N_("unknown tag {tag}"), tag=repr(tag[:20]))


def _field(data: dict, key: str, kind: type):
    value = data.get(key)
    if kind is int and isinstance(value, bool) or not isinstance(value, kind):
        raise MalformedAnswer(N_("field {field} is not a {kind}"), field=repr(key), kind=kind.__name__)
    return value


def _checked_number(v) -> float | int:
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise MalformedAnswer(N_("a number is not a number"))
    if isinstance(v, str):
        if v not in ("nan", "inf", "-inf"):
            raise MalformedAnswer(N_("a number is not a number"))
        return _float(v)
    if isinstance(v, int) and not -(1 << 63) <= v < (1 << 63):  # beyond int64: a float, if one can hold it
        try:
            return float(v)
        except OverflowError:
            raise MalformedAnswer(N_("a number is too large for any number type")) from None
    return v


def _decode_array(data: dict) -> np.ndarray:
    shape, values, dtype = _field(data, "shape", list), _field(data, "v", list), _field(data, "dtype", str)
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape) or len(shape) > MAX_DEPTH:
        raise MalformedAnswer(N_("an array's shape is not a list of sizes"))
    if math.prod(shape) != len(values) or len(values) > MAX_ENTRIES:
        raise MalformedAnswer(N_("an array's shape does not match its entries"))
    if dtype == "bool":
        if not all(isinstance(v, bool) for v in values):
            raise MalformedAnswer(N_("a boolean array holds something else"))
        return np.array(values, dtype=bool).reshape(shape)
    if dtype not in ("int", "float"):
        raise MalformedAnswer(N_("unknown array dtype"))
    numbers = [_checked_number(v) for v in values]
    if dtype == "int" and all(isinstance(v, int) for v in numbers):
        return np.array(numbers, dtype=np.int64).reshape(shape) if numbers else np.zeros(shape, dtype=np.int64)
    return np.array(numbers, dtype=float).reshape(shape)


def call_student_function(func, args=(), kwargs=None):
    """Call a student's function and report what happened, whatever it does.

    Returns ``("returned", value, warnings)`` or ``("raised", type name, message,
    traceback, warnings)``: ``warnings`` is the text of each warning the call emitted
    (shown to the student as ordinary output: a warning never fails a check), and the
    traceback holds the student's frames only.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = func(*args, **(kwargs or {}))
        except (Exception, SystemExit) as err:  # SystemExit: a student's sys.exit() ends the call, not the run
            return ("raised", type(err).__name__, str(err)[:MAX_TEXT], _student_traceback(err), _texts(caught))
    return ("returned", value, _texts(caught))


def _texts(caught) -> list[str]:
    return [f"{w.category.__name__}: {w.message}"[:MAX_TEXT] for w in caught[:20]]


def _student_traceback(err: BaseException) -> str:
    """The traceback of ``err`` without this module's own frame."""
    tb = err.__traceback__.tb_next if err.__traceback__ is not None else None
    try:
        return "".join(traceback.format_exception(type(err), err, tb))[-4 * MAX_TEXT:]
    except Exception:  # a hostile exception whose __str__ raises
        return f"{type(err).__name__}"
