"""The column converters of the decoded content check's fast path: a row they clear is one
eosctl.rules.fields calls the same, and the rows of equal values are cleared (what makes the path fast)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import fastavro
import pyarrow as pa
import pytest

from auditors.fieldcolumns import (
    FieldType,
    Unsupported,
    converter,
    out_of_range,
    plain_schema,
)
from eosctl.rules.fields import Tolerances, same

SCHEMA = {
    "type": "record", "name": "Order", "namespace": "t",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "seen", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
        {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID"]}},
        {"name": "ratio", "type": ["null", "double"]},
        {"name": "ok", "type": "boolean"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}
T0 = datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=UTC)


def _both(record: dict) -> tuple[dict, dict]:
    """The record as fastavro reads it with and without logical types."""
    parsed = fastavro.parse_schema(SCHEMA)
    plain, _ = plain_schema(SCHEMA)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, record)
    data = out.getvalue()
    return (fastavro.schemaless_reader(io.BytesIO(data), parsed, None),
            fastavro.schemaless_reader(io.BytesIO(data), fastavro.parse_schema(plain), None))


def _records() -> list[dict]:
    return [{"id": i, "amount": Decimal(f"{i}.5{i % 10}"), "placed": T0 + timedelta(seconds=i),
             "seen": None if i % 3 == 0 else T0 + timedelta(milliseconds=i), "state": ("NEW", "PAID")[i % 2],
             "ratio": None if i == 4 else i / 7, "ok": i % 2 == 0, "tags": [f"t{i}"]} for i in range(8)]


EXACT = Tolerances()


def _check(field: str, sink: list, arrow_type: pa.DataType, tol: Tolerances = EXACT) -> list[bool]:
    """The converter's suspects for these sink values against _records(); asserts each cleared row is
    one eosctl.rules.fields calls the same."""
    _, types = plain_schema(SCHEMA)
    pairs = [_both(r) for r in _records()]
    col = pa.array(sink, arrow_type)
    conv = converter(types[field], col.type)
    assert conv is not None, (field, arrow_type)
    suspects = conv([p[field] for _, p in pairs], col, tol).tolist()
    for (logical, _), python, suspect in zip(pairs, col.to_pylist(), suspects, strict=True):
        assert suspect or same(python, logical[field], tol), (field, python, logical[field])
    return suspects


def test_equal_values_are_cleared_and_each_difference_is_a_suspect():
    recs = _records()
    ids = [r["id"] for r in recs]
    assert _check("id", ids, pa.int64()) == [False] * 8
    assert _check("id", [*ids[:3], 99, *ids[4:]], pa.int32()) == [False] * 3 + [True] + [False] * 4
    amounts = [r["amount"] for r in recs]
    assert _check("amount", amounts, pa.decimal128(9, 2)) == [False] * 8
    # Another scale in the sink: the same values, and one written x100 (the wrong scale).
    wrong = [*amounts[:5], amounts[5] * 100, *amounts[6:]]
    assert _check("amount", wrong, pa.decimal128(12, 4)) == [False] * 5 + [True] + [False] * 2
    naive = [r["placed"].replace(tzinfo=None) for r in recs]
    assert _check("placed", naive, pa.timestamp("us")) == [False] * 8
    assert _check("placed", [r["placed"] for r in recs], pa.timestamp("us", "UTC")) == [False] * 8
    # A sink keeping milliseconds: a suspect each (fields says "differs below the millisecond") unless the
    # user names the precision.
    ms = [t.replace(microsecond=t.microsecond // 1000 * 1000) for t in naive]
    assert _check("placed", ms, pa.timestamp("ms")) == [True] * 8
    assert _check("placed", ms, pa.timestamp("ms"), Tolerances(timestamp_precision="ms")) == [False] * 8
    seen = [None if r["seen"] is None else r["seen"].replace(tzinfo=None)
            for r in (_both(r)[0] for r in recs)]  # milliseconds, as the record holds them
    assert _check("seen", seen, pa.timestamp("us")) == [False] * 8
    assert _check("seen", [T0.replace(tzinfo=None)] + seen[1:], pa.timestamp("us")) == [True] + [False] * 7
    states = [r["state"] for r in recs]
    assert _check("state", ["PAID", *states[1:]], pa.string()) == [True] + [False] * 7
    ratios = [r["ratio"] for r in recs]
    assert _check("ratio", ratios, pa.float64()) == [False] * 8
    # A float32 column holds i/7 otherwise than a double (not 0 or 1): a suspect, as fields says; and 0.0
    # for a null.
    assert _check("ratio", [*ratios[:4], 0.0, *ratios[5:]], pa.float32()) == [False] + [True] * 6 + [False]
    assert _check("ok", [r["ok"] for r in recs], pa.bool_()) == [False] * 8
    tags = [r["tags"] for r in recs]
    assert _check("tags", [*tags[:2], ["x"], *tags[3:]], pa.list_(pa.string())) == [False] * 2 + [True] + [
        False] * 5


def test_a_decimal_of_more_digits_than_its_precision_is_a_suspect():
    # fastavro rounds an unscaled value beyond the schema's precision: the row is judged value by value.
    ft = FieldType("decimal", precision=3, scale=2)
    col = pa.array([Decimal("1.23"), Decimal("12.34")], pa.decimal128(9, 2))
    conv = converter(ft, col.type)
    assert conv is not None
    assert conv([(123).to_bytes(2, "big"), (1234).to_bytes(2, "big")], col, Tolerances()).tolist() == [
        False, True]


def test_pairs_without_a_converter_and_schemas_the_plain_reading_refuses():
    _, types = plain_schema(SCHEMA)
    assert converter(types["amount"], pa.string()) is None
    assert converter(types["placed"], pa.int64()) is None  # epoch milliseconds: value by value
    assert converter(types["placed"], pa.timestamp("ns")) is None
    assert converter(types["id"], pa.string()) is not None  # a plain long reads as itself: value by value
    for logical in ("uuid", "date", "time-millis", "local-timestamp-micros"):
        base = {"uuid": "string", "date": "int"}.get(logical, "long" if "micros" in logical else "int")
        with pytest.raises(Unsupported):
            plain_schema({"type": "record", "name": "R",
                          "fields": [{"name": "f", "type": {"type": base, "logicalType": logical}}]})
    nested = {"type": "record", "name": "R", "fields": [{"name": "f", "type": {
        "type": "record", "name": "In", "fields": [
            {"name": "t", "type": {"type": "long", "logicalType": "timestamp-micros"}}]}}]}
    with pytest.raises(Unsupported):  # a timestamp below the top level: not range-checked, so refused
        plain_schema(nested)
    with pytest.raises(Unsupported):
        plain_schema(json.loads('{"type": "string"}'))


def test_an_instant_beyond_a_datetime_is_out_of_range():
    micros = FieldType("timestamp", micros=1)
    millis = FieldType("timestamp", micros=1000)
    assert not out_of_range([0, None, 253402300799999999], micros)
    assert out_of_range([253402300800000000], micros)
    assert not out_of_range([253402300799999], millis)
    assert out_of_range([253402300800000], millis)
    assert out_of_range([-62135596800000001], micros)
