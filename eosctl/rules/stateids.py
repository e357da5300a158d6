"""What a state sink's row and a Kafka record are compared by: the key and the value each names, in one
canonical text form (no I/O), so that a JSON field, a text column, an integer column and a blob holding
the same thing compare equal.

A state sink (``mode = "upsert"`` or ``"aggregate"``, docs/config.md) names its key as ``key_column`` (the
record's key bytes) or ``key_fields`` (COLUMN = "key" | "key.PATH" | "value.PATH"), and its value as
``value_fields`` (COLUMN = "value" | "value.PATH"), ``value_column`` (the value's bytes), or
``value_hash_column`` (their md5 hex).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from eosctl.config.model import Sink

# A value shown in a finding is cut to this many characters.
SHOWN_MAX = 120
_MISSING = object()


def canon(v: Any) -> str | None:
    """One text per value: text as it is, a number without a trailing .0, a JSON object or list compact
    with sorted keys, bytes as UTF-8 text; None stays None (SQL NULL, JSON null, a missing field)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (bytes, bytearray, memoryview)):
        return _text(bytes(v).decode("utf-8", errors="surrogateescape"))
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() else repr(v)
    if isinstance(v, Decimal):
        return str(int(v)) if v.is_finite() and v == v.to_integral_value() else str(v.normalize())
    if isinstance(v, int):
        return str(v)
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    if isinstance(v, str):
        return _text(v)
    return str(v)


def _text(s: str) -> str:
    """A text that is a JSON object or list compares by its content (a jsonb column reformats it)."""
    if s[:1] in ("{", "["):
        try:
            return canon(json.loads(s)) or s
        except ValueError:
            return s
    return s


def shown(v: Any) -> str:
    """A value for people in a finding's detail: canonical, cut at SHOWN_MAX characters."""
    text = canon(v)
    if text is None:
        return "null"
    return text if len(text) <= SHOWN_MAX else text[:SHOWN_MAX - 3] + "..."


def key_columns(sink: Sink) -> tuple[str, ...]:
    """The sink's columns that hold the key, in the config's order."""
    if sink.key_fields:
        return tuple(c for c, _ in sink.key_fields)
    return (sink.key_column,) if sink.key_column else ()


def value_columns(sink: Sink) -> tuple[str, ...]:
    """The sink's columns compared with the records' values (none: keys only); an aggregate's fold."""
    if sink.mode == "aggregate" and sink.aggregate is not None:
        return (sink.aggregate.column,)
    if sink.value_fields:
        return tuple(c for c, _ in sink.value_fields)
    one = sink.value_column or sink.value_hash_column
    return (one,) if one else ()


def _json(data: bytes | None, cache: dict[str, Any], which: str) -> Any:
    if which not in cache:
        try:
            cache[which] = json.loads(data) if data is not None else _MISSING
        except ValueError:
            cache[which] = _MISSING
    return cache[which]


def _field(key: bytes | None, value: bytes | None, source: str, cache: dict[str, Any]) -> Any:
    """What ``source`` ("key", "key.a.b", "value", "value.a") names of a record; None where it has none."""
    head, _, path = source.partition(".")
    raw = key if head == "key" else value
    if not path:
        return raw
    doc = _json(raw, cache, head)
    for part in path.split("."):
        if isinstance(doc, dict) and part in doc:
            doc = doc[part]
        elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        else:
            return None
    return None if doc is _MISSING else doc


def record_key(sink: Sink, key: bytes | None, value: bytes | None,
               cache: dict[str, Any] | None = None) -> tuple[str | None, ...]:
    """The record's key as the sink's key columns hold it."""
    cache = {} if cache is None else cache
    if sink.key_fields:
        return tuple(canon(_field(key, value, src, cache)) for _, src in sink.key_fields)
    return (canon(key),)


def is_delete(sink: Sink, value: bytes | None, cache: dict[str, Any] | None = None) -> bool:
    """A tombstone (no value), or a value the config names as a delete (delete_values)."""
    if value is None:
        return True
    if not sink.delete_values:
        return False
    cache = {} if cache is None else cache
    text = canon(value)
    for d in sink.delete_values:
        path, eq, wanted = d.partition("=")
        if eq and path.startswith("value.") and " " not in path:
            if canon(_field(None, value, path, cache)) == canon(wanted):
                return True
        elif text == canon(d):
            return True
    return False


def record_value(sink: Sink, key: bytes | None, value: bytes | None,
                 cache: dict[str, Any] | None = None) -> tuple[str | None, ...] | None:
    """The record's value as the sink's value columns hold it; None where the sink has none."""
    cache = {} if cache is None else cache
    if sink.mode == "aggregate" and sink.aggregate is not None:  # the field the fold reads
        field = sink.aggregate.field
        return (canon(_field(key, value, field, cache)) if field else None,)
    if sink.value_fields:
        return tuple(canon(_field(key, value, src, cache)) for _, src in sink.value_fields)
    if sink.value_column:
        return (canon(value),)
    if sink.value_hash_column:
        return (None if value is None else hashlib.md5(value).hexdigest(),)
    return None


def topic_fold(sink: Sink, key: bytes | None, value: bytes | None) -> tuple[str | None, ...]:
    """The fold a compacted topic's record holds (aggregate.column: "value", "value.PATH", or "value:long",
    the 8 big-endian bytes of Kafka's LongSerializer, what a Streams count() writes)."""
    column = sink.aggregate.column if sink.aggregate is not None else "value"
    if column == "value:long":
        if value is None or len(value) != 8:
            return (None,)
        return (str(int.from_bytes(value, "big", signed=True)),)
    return (canon(_field(key, value, column, {})),)


def row_tuple(row: Sequence[Any], hashed: bool = False) -> tuple[str | None, ...]:
    """A sink row's columns in canonical form (``hashed``: an md5 hex column, compared in lower case)."""
    out = tuple(canon(v) for v in row)
    return tuple(None if v is None else v.lower() for v in out) if hashed else out


def key_text(columns: Sequence[str], key: Sequence[str | None]) -> str:
    """A key for people: its one column's value, or COLUMN=VALUE for each of several."""
    if len(columns) == 1:
        return "null" if key[0] is None else key[0]
    return ", ".join(f"{c}={'null' if v is None else v}" for c, v in zip(columns, key, strict=True))


def value_text(columns: Sequence[str], value: Sequence[str | None] | None) -> str:
    """A value (canonical already: canon's output) for people, cut like ``shown``, never parsed again (one
    per source record)."""
    if value is None:
        return "(not compared)"
    if len(columns) == 1:
        text = "null" if value[0] is None else value[0]
    else:
        text = ", ".join(f"{c}={'null' if v is None else v}" for c, v in zip(columns, value, strict=True))
    return text if len(text) <= SHOWN_MAX else text[:SHOWN_MAX - 3] + "..."
