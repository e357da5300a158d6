"""The decoded content check compared a column at a time: which rows *might* differ, cheaply.

eosctl.rules.fields judges a row value by value in Python (tens of microseconds a row). Most rows of a
sink are their records' fields, so here each mapped column is compared whole, once per (Avro field type,
sink column type) pair: the converter is chosen per column, not per value. A converter only ever clears
rows whose values eosctl.rules.fields would call the same (equal integers, strings, booleans; floats equal
or both NaN; decimals of equal value; instants equal at the precision the user names); every other row is
a *suspect*, judged by eosctl.rules.fields itself, so the findings are the same.

The values compared are Avro's own encodings (fastavro reading the schema with its logical types removed:
a decimal's unscaled bytes, a timestamp's integer), about half fastavro's cost of building Decimal and
datetime objects. Removing them must not change what a record decodes to: plain_schema refuses a schema
where it could (a logical type fastavro can fail on, or round, anywhere but where a check here covers it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from eosctl.rules.fields import PRECISIONS, Tolerances, _why_not

_PRIMITIVE = {"long": "int", "int": "int", "string": "string", "boolean": "bool", "double": "float",
              "float": "float"}
_TIMESTAMPS = {"timestamp-micros": 1, "timestamp-millis": 1000}  # microseconds per unit
# The instants a datetime can hold (fastavro's reader fails outside them: the record does not decode).
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _micros_of(t: datetime) -> int:
    d = t - _EPOCH
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


MIN_MICROS = _micros_of(datetime.min.replace(tzinfo=UTC))
MAX_MICROS = _micros_of(datetime.max.replace(tzinfo=UTC))


class Unsupported(Exception):
    """A schema the plain reading could decode otherwise than fastavro's logical reading: the caller checks
    such a partition value by value."""


@dataclass(frozen=True)
class FieldType:
    """A top-level field as the plain reading returns it: ``kind`` "int", "string", "bool", "float",
    "decimal" (unscaled bytes), "timestamp" (an integer of ``micros`` microseconds) or "other" (a type
    without logical types, e.g. an array or a nested record: compared value by value)."""

    kind: str
    nullable: bool = False
    precision: int = 0
    scale: int = 0
    micros: int = 1


def plain_schema(schema: Any) -> tuple[Any, dict[str, FieldType | None]]:
    """The record schema without its logical types, and each top-level field's FieldType (None: a type no
    converter reads). Raises Unsupported for anything but a record whose logical types are decimals
    (bytes or fixed: fastavro never fails on them; a value of more digits than its precision, which
    fastavro rounds, is a suspect) and top-level timestamp-millis/-micros (an instant a datetime cannot
    hold is found by out_of_range)."""
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise Unsupported("not a record")
    fields, types = [], {}
    for f in schema.get("fields", []):
        fields.append({**f, "type": _strip(f["type"], top=True)})
        types[f["name"]] = _field_type(f["type"])
    return {**schema, "fields": fields}, types


def _strip(t: Any, top: bool) -> Any:
    if isinstance(t, list):
        return [_strip(m, top) for m in t]
    if not isinstance(t, dict):
        return t
    logical = t.get("logicalType")
    if logical is not None:
        if logical == "decimal" and t.get("type") in ("bytes", "fixed"):
            pass
        elif logical in _TIMESTAMPS and t.get("type") == "long" and top:
            pass
        else:
            raise Unsupported(f"logical type {logical}")
        t = {k: v for k, v in t.items() if k != "logicalType"}
    if t.get("type") == "record":
        return {**t, "fields": [{**f, "type": _strip(f["type"], False)} for f in t.get("fields", [])]}
    if t.get("type") == "array":
        return {**t, "items": _strip(t["items"], False)}
    if t.get("type") == "map":
        return {**t, "values": _strip(t["values"], False)}
    return t


def _field_type(t: Any) -> FieldType | None:
    if isinstance(t, dict | list) and _no_logical(t):
        base = _field_type_of(t)
        return base if base is not None else FieldType("other")
    return _field_type_of(t)


def _no_logical(t: Any) -> bool:
    """Whether the type reads the same with and without logical types: none anywhere in it, and no named
    type but primitives (a name defined elsewhere may carry one)."""
    if isinstance(t, str):
        return t in _PRIMITIVE or t in ("null", "bytes")
    if isinstance(t, list):
        return all(_no_logical(m) for m in t)
    if not isinstance(t, dict) or "logicalType" in t:
        return False
    kind = t.get("type")
    if kind == "record":
        return all(_no_logical(f.get("type")) for f in t.get("fields", []))
    if kind == "array":
        return _no_logical(t.get("items"))
    if kind == "map":
        return _no_logical(t.get("values"))
    return kind in ("enum", "fixed") or _no_logical(kind)


def _field_type_of(t: Any) -> FieldType | None:
    nullable = False
    if isinstance(t, list):
        members = [m for m in t if m != "null"]
        if len(members) != 1:
            return None
        nullable, t = len(members) != len(t), members[0]
    if isinstance(t, str):
        kind = _PRIMITIVE.get(t)
        return FieldType(kind, nullable) if kind else None
    if not isinstance(t, dict):
        return None
    logical, base = t.get("logicalType"), t.get("type")
    if logical == "decimal" and isinstance(t.get("precision"), int):
        return FieldType("decimal", nullable, t["precision"], int(t.get("scale", 0)))
    if logical in _TIMESTAMPS:
        return FieldType("timestamp", nullable, micros=_TIMESTAMPS[logical])
    if logical is None and base == "enum":
        return FieldType("string", nullable)
    if logical is None and isinstance(base, str) and base in _PRIMITIVE:
        return FieldType(_PRIMITIVE[base], nullable)
    return None


def out_of_range(values: Sequence[Any], ft: FieldType) -> bool:
    """Whether a timestamp field holds an instant fastavro's reader cannot make a datetime of."""
    ints = _ints([v for v in values if v is not None])
    if ints is None:
        return True
    lo, hi = -(-MIN_MICROS // ft.micros), MAX_MICROS // ft.micros  # data * micros within the range
    return bool(len(ints)) and bool((ints < lo).any() or (ints > hi).any())


Converter = Callable[[Sequence[Any], Any, Tolerances], np.ndarray]


def converter(ft: FieldType | None, column_type: Any) -> Converter | None:
    """What compares a field of type ``ft`` (plain values) with a sink column of this Arrow type: a function
    (values, column, tolerances) -> the rows that may differ (bool); None where no converter reads the
    pair (the caller checks value by value)."""
    import pyarrow as pa  # lazy: see docs/imports.md

    if ft is None:
        return None
    t = column_type
    if ft.kind == "other":
        return _value_suspects
    if ft.kind == "int" and pa.types.is_integer(t) and t != pa.uint64():
        return _int_suspects
    if ft.kind == "string" and (pa.types.is_string(t) or pa.types.is_large_string(t)):
        return _equal_suspects
    if ft.kind == "bool" and pa.types.is_boolean(t):
        return _equal_suspects
    if ft.kind == "float" and pa.types.is_floating(t):
        return _float_suspects
    if ft.kind == "decimal" and pa.types.is_decimal128(t) and t.precision <= 18 and ft.precision <= 38:
        return lambda values, col, tol: _decimal_suspects(values, col, ft, t.scale)
    if ft.kind == "timestamp" and pa.types.is_timestamp(t) and t.unit in _UNIT_MICROS:
        return lambda values, col, tol: _instant_suspects(values, col, ft, _UNIT_MICROS[t.unit], tol)
    if ft.kind in ("int", "string", "bool", "float"):  # their plain values are their logical ones
        return _value_suspects
    return None


_UNIT_MICROS = {"s": 1_000_000, "ms": 1_000, "us": 1}


def _nulls(values: Sequence[Any]) -> np.ndarray:
    return np.fromiter((v is None for v in values), bool, len(values))


def _sink_nulls(col: Any) -> np.ndarray:
    if not col.null_count:
        return np.zeros(len(col), bool)
    return col.is_null().to_numpy(zero_copy_only=False)


def _one_null(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a != b


def _ints(values: Sequence[Any]) -> np.ndarray | None:
    try:
        return np.fromiter(values, np.int64, len(values))
    except (OverflowError, TypeError):
        return None


def _filled(values: Sequence[Any], nulls: np.ndarray, fill: Any) -> Sequence[Any]:
    return [fill if v is None else v for v in values] if nulls.any() else values


def _sink_ints(col: Any) -> np.ndarray:
    import pyarrow as pa  # lazy: see docs/imports.md

    return col.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)


def _int_suspects(values: Sequence[Any], col: Any, tol: Tolerances) -> np.ndarray:
    rn, sn = _nulls(values), _sink_nulls(col)
    rec = _ints(_filled(values, rn, 0))
    if rec is None:
        return np.ones(len(values), bool)
    return ((rec != _sink_ints(col)) & ~rn & ~sn) | _one_null(rn, sn)


def _equal_suspects(values: Sequence[Any], col: Any, tol: Tolerances) -> np.ndarray:
    import pyarrow as pa  # lazy: see docs/imports.md
    import pyarrow.compute as pc  # lazy: contentcheck avoids it too; see docs/imports.md

    if pa.types.is_large_string(col.type):
        col = col.cast(pa.string())
    rec = pa.array(values, col.type)
    same = pc.fill_null(pc.equal(rec, col), False).to_numpy(zero_copy_only=False)
    rn, sn = _nulls(values), _sink_nulls(col)
    return ~same & ~(rn & sn)


def _float_suspects(values: Sequence[Any], col: Any, tol: Tolerances) -> np.ndarray:
    import pyarrow as pa  # lazy: see docs/imports.md

    rn, sn = _nulls(values), _sink_nulls(col)
    rec = np.fromiter(_filled(values, rn, 0.0), np.float64, len(values))
    sink = col.fill_null(0.0).cast(pa.float64()).to_numpy(zero_copy_only=False)
    same = (rec == sink) | (np.isnan(rec) & np.isnan(sink))
    return (~same & ~rn & ~sn) | _one_null(rn, sn)


def _decimal_suspects(values: Sequence[Any], col: Any, ft: FieldType, sink_scale: int) -> np.ndarray:
    rn, sn = _nulls(values), _sink_nulls(col)
    frm = int.from_bytes
    unscaled = [0 if v is None else frm(v, "big", signed=True) for v in values]
    rec = _ints(unscaled)
    if rec is None:  # beyond 64 bits: value by value
        return np.ones(len(values), bool)
    # decimal128 holds little-endian 128-bit integers; a precision of 18 digits or fewer fits the low word.
    words = np.frombuffer(col.buffers()[1], np.int64)
    sink = words[2 * col.offset:2 * (col.offset + len(col))][::2]
    suspect = np.zeros(len(values), bool)
    if ft.precision < 19:  # more digits than the schema's precision: fastavro rounds them, judge the row
        suspect |= np.abs(rec) >= 10 ** ft.precision
    k = sink_scale - ft.scale
    if k:
        big = 10 ** (18 - abs(k))  # scaled beyond int64: judge the row
        if k > 0:
            suspect |= np.abs(rec) >= big
            rec = np.where(suspect, 0, rec) * 10 ** k
        else:
            suspect |= np.abs(sink) >= big
            sink = np.where(suspect, 0, sink) * 10 ** -k
    return suspect | ((rec != sink) & ~rn & ~sn) | _one_null(rn, sn)


def _value_suspects(values: Sequence[Any], col: Any, tol: Tolerances) -> np.ndarray:
    """Value by value, as eosctl.rules.fields compares them (a nested record, an array, a map: a type whose
    plain reading is its logical one), the sink's values as Arrow gives them to Python."""
    why = _why_not
    return np.fromiter((why(s, v, tol) is not None for s, v in zip(col.to_pylist(), values, strict=True)),
                       bool, len(values))


def _instant_suspects(values: Sequence[Any], col: Any, ft: FieldType, sink_micros: int,
                      tol: Tolerances) -> np.ndarray:
    rn, sn = _nulls(values), _sink_nulls(col)
    rec = _ints(_filled(values, rn, 0))
    if rec is None:
        return np.ones(len(values), bool)
    rec = rec * ft.micros  # within a datetime's range (out_of_range): no overflow
    sink = _sink_ints(col) * sink_micros
    unit = PRECISIONS.get(tol.timestamp_precision or "us", 1)
    return (((rec // unit) != (sink // unit)) & ~rn & ~sn) | _one_null(rn, sn)
