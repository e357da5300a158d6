"""Is a dataclass built from a file what its annotations say? The check behind every file eosctl reads.

Snapshots and JSON reports are files anyone can edit. `from_dict` builds the dataclasses without asking
whether "topic" is a string or "partition" an int; a wrong type then surfaces far away (a TypeError while
sorting a table, an AttributeError in the HTML writer) as a traceback. `check()` walks a freshly built
object against its classes' type hints and names the first field that is wrong, so the reader can say
in one line which file and field to fix.

Understood: None, bool, int (not bool), float (an int is fine), str, enums, X | None and other unions,
list[X], tuple[X, ...], tuple[X, Y], dict[K, V], set, Any, and nested dataclasses. Anything else is
accepted as is.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any


class WrongType(ValueError):
    """A field with a value its annotation does not allow; the message names the field's path."""


# A compiled check: None when the value fits, else (path below the value, what was wanted, the value).
Problem = tuple[str, str, object]
Checker = Callable[[object], Problem | None]


def check(obj: object, where: str = "") -> None:
    """WrongType naming the first field of ``obj`` (a dataclass, or a list of them) whose value does not
    match its annotation."""
    hint: Any = type(obj) if dataclasses.is_dataclass(obj) else Any
    problem = _checker(hint)(obj)
    if problem is not None:
        sub, want, v = problem
        path = f"{where}{sub}" if where else sub.removeprefix(".") or type(obj).__name__
        raise WrongType(f"{path}: expected {want}, got {value_name(v)}")


def value_name(v: object) -> str:
    """A value as a message names it: "null", "the string 'x'", "int 5", "list"."""
    if v is None:
        return "null"
    if isinstance(v, str):
        return f"the string {v[:40]!r}"
    return f"{type(v).__name__} {str(v)[:40]}" if isinstance(v, int | float) else type(v).__name__


def _ok(v: object) -> None:
    return None


def _is(types_: type | tuple[type, ...], want: str, exclude: type | None = None) -> Checker:
    def run(v: object) -> Problem | None:
        if isinstance(v, types_) and not (exclude is not None and isinstance(v, exclude)):
            return None
        return "", want, v
    return run


_PLAIN: dict[Any, Checker] = {
    Any: _ok, object: _ok,
    type(None): _is(type(None), "null"), None: _is(type(None), "null"),
    bool: _is(bool, "true or false"),
    int: _is(int, "an integer", exclude=bool),
    float: _is((int, float), "a number", exclude=bool),
    str: _is(str, "a string"),
}


@cache
def _checker(hint: Any) -> Checker:
    if hint in _PLAIN:
        return _PLAIN[hint]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _union(args)
    if origin in (list, set, frozenset) or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
        return _sequence(_checker(args[0]) if args else _ok)
    if origin is tuple:
        return _fixed(tuple(_checker(a) for a in args))
    if origin is dict:
        return _mapping(*(_checker(a) for a in args) if args else (_ok, _ok))
    if origin is typing.Literal:
        return lambda v: None if v in args else ("", " or ".join(repr(a) for a in args), v)
    if origin is not None:
        return _ok  # other generics (Callable, ...) are not data read from a file
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _is(hint, f"one of {', '.join(str(m.value) for m in hint)}")
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass(hint)
    if isinstance(hint, type):
        return _is(hint, f"a {hint.__name__}")
    return _ok


def _union(args: tuple[Any, ...]) -> Checker:
    options = [_checker(a) for a in args]
    want = " or ".join(_want(a) for a in args)

    def run(v: object) -> Problem | None:
        deep = None
        for option in options:
            problem = option(v)
            if problem is None:
                return None
            if problem[0] and deep is None:  # right kind (a list, an object), wrong inside: say that
                deep = problem
        return deep or ("", want, v)
    return run


def _sequence(item: Checker) -> Checker:
    def run(v: object) -> Problem | None:
        if not isinstance(v, list | tuple | set | frozenset):
            return "", "a list", v
        if item is not _ok:
            for i, x in enumerate(v):
                if (problem := item(x)) is not None:
                    return f"[{i}]{problem[0]}", problem[1], problem[2]
        return None
    return run


def _fixed(items: tuple[Checker, ...]) -> Checker:
    def run(v: object) -> Problem | None:
        if not isinstance(v, list | tuple) or len(v) != len(items):
            return "", f"a list of {len(items)}", v
        for i, (x, item) in enumerate(zip(v, items, strict=True)):
            if (problem := item(x)) is not None:
                return f"[{i}]{problem[0]}", problem[1], problem[2]
        return None
    return run


def _mapping(key: Checker, value: Checker) -> Checker:
    def run(v: object) -> Problem | None:
        if not isinstance(v, dict):
            return "", "an object", v
        for k, x in v.items():
            if (problem := key(k)) is not None:
                return f" key {str(k)[:40]!r}", problem[1], problem[2]
            if (problem := value(x)) is not None:
                return f"[{str(k)[:40]!r}]{problem[0]}", problem[1], problem[2]
        return None
    return run


def _dataclass(cls: type) -> Checker:
    fields: list[tuple[str, Checker]] = []  # filled on first use: a dataclass may contain itself

    def run(v: object) -> Problem | None:
        if not isinstance(v, cls):
            return "", f"a {cls.__name__}", v
        if not fields:
            fields.extend((name, _checker(hint)) for name, hint in _hints(cls))
        for name, field_check in fields:
            if (problem := field_check(getattr(v, name))) is not None:
                return f".{name}{problem[0]}", problem[1], problem[2]
        return None
    return run


def _hints(cls: type) -> list[tuple[str, Any]]:
    module = vars(sys.modules[cls.__module__]) if cls.__module__ in sys.modules else None
    out = []
    for f in dataclasses.fields(cls):
        try:  # one field at a time: a name imported only for type checkers leaves that field unchecked
            holder = type("_", (), {"__annotations__": {f.name: f.type}, "__module__": cls.__module__})
            out.append((f.name, typing.get_type_hints(holder, module)[f.name]))
        except (NameError, TypeError, AttributeError):
            out.append((f.name, Any))
    return out


def _want(hint: Any) -> str:
    if hint in (type(None), None):
        return "null"
    plain = {int: "an integer", str: "a string", float: "a number", bool: "true or false"}
    if hint in plain:
        return plain[hint]
    origin = typing.get_origin(hint)
    if origin in (list, tuple, set, frozenset):
        return "a list"
    if origin is dict:
        return "an object"
    return f"a {getattr(hint, '__name__', str(hint))}"
