"""Decoded records against a sink's typed columns: each planted fault gives exactly its finding, with the
field named and both values shown."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from eosctl.rules.fields import Fields, Tolerances, check_fields, default_mapping, field_of, same, shown

AT = datetime(2026, 12, 1, 10, 30, 0, 123456, tzinfo=UTC)


def _record(i: int) -> Fields:
    return Fields({"order_id": f"o-{i}"},
                  {"id": i, "amount": Decimal(f"{i}.50"), "at": AT + timedelta(seconds=i), "state": "PAID",
                   "blob": bytes([i]), "lines": [{"sku": f"s{i}", "qty": i}], "ratio": i / 3})


RECORDS = {i: _record(i) for i in range(10)}
MAPPING = {"order_id": "key.order_id", "id": "value.id", "amount": "value.amount", "at": "value.at",
           "state": "value.state", "blob": "value.blob", "lines": "value.lines", "ratio": "value.ratio"}


def _row(i: int, **change) -> tuple[int, dict]:
    rec = RECORDS[i]
    cols = {"order_id": rec.key["order_id"], **{c: rec.value[c] for c in MAPPING if c != "order_id"}}
    # What a DuckDB sink gives back: a naive UTC timestamp, a struct list as dicts.
    cols["at"] = cols["at"].replace(tzinfo=None)
    cols.update(change)
    return i, cols


def test_a_clean_sink_has_no_finding():
    assert check_fields("t", 0, [_row(i) for i in range(10)], RECORDS, MAPPING) == []


def test_one_altered_field_is_named_with_both_values():
    (f,) = check_fields("t", 0, [*(_row(i) for i in range(10) if i != 4), _row(4, state="NEW")], RECORDS,
                        MAPPING)
    assert (f.kind, f.first_offset, f.last_offset, f.cause.rule) == ("content_mismatch", 4, 4,
                                                                     "different_field")
    assert f.cause.summary == ("The sink's row at t[0] offset 4 holds its record's fields but column 'state' "
                               "(field value.state) holds 'NEW' where the record has 'PAID': differs: a "
                               "transform or column mapping that mangles the field.")
    assert f.detail == "state: sink 'NEW', record 'PAID'"


def test_a_decimal_at_the_wrong_scale_is_said_so():
    (f,) = check_fields("t", 0, [_row(3, amount=Decimal("350"))], RECORDS, MAPPING)
    assert f.cause.rule == "different_field"
    assert ("column 'amount' (field value.amount) holds 350 where the record has 3.50: the same digits at "
            "another scale (the record's is 2; x10^2)") in f.cause.summary


def test_a_row_holding_another_records_fields_names_that_record():
    _, other = _row(7)
    (f,) = check_fields("t", 0, [_row(2), (3, other), _row(4)], RECORDS, MAPPING)
    assert (f.first_offset, f.cause.rule, f.detail) == (3, "different_record", "the fields of offset 7")
    assert f.cause.summary == ("The sink's row at t[0] offset 3 holds the record at offset 7's fields, not "
                               "its own record's (all 8 mapped columns are that record's, 7 not its own's): "
                               "a writer that mixed up records, or a log rewritten under the sink.")


def test_a_shifted_writer_is_one_finding_with_its_shift():
    rows = [_row(0), _row(1), *((i + 1, _row(i)[1]) for i in range(2, 6)), _row(8)]
    (f,) = check_fields("t", 0, rows, RECORDS, MAPPING)
    assert (f.first_offset, f.last_offset, f.count, f.cause.rule, f.cause.shift) == (
        3, 6, 4, "shifted_coordinates", 1)


def test_a_row_at_an_offset_with_no_data_record_is_left_to_the_offset_rules():
    # Offset 5 holds a transaction marker (no decoded record): a row there holding its neighbour's fields is
    # that row's phantom_marker alone, never a shift as well (one finding per row); a shifted run that passes
    # over the marker is still one finding.
    records = {i: r for i, r in RECORDS.items() if i != 5}
    assert check_fields("t", 0, [_row(4), (5, _row(4)[1]), _row(6)], records, MAPPING) == []
    (f,) = check_fields("t", 0, [_row(2), (4, _row(3)[1]), (5, _row(4)[1]), _row(6)], records, MAPPING)
    assert (f.first_offset, f.last_offset, f.cause.rule, f.cause.shift) == (4, 5, "shifted_coordinates", 1)


def test_tolerances_the_user_names():
    ms = AT.replace(microsecond=123000)
    (f,) = check_fields("t", 0, [_row(0, at=ms)], RECORDS, MAPPING)
    assert "differs below the millisecond (set timestamp_precision = \"ms\"" in f.cause.summary
    ms_ok = Tolerances(timestamp_precision="ms")
    assert check_fields("t", 0, [_row(0, at=ms)], RECORDS, MAPPING, ms_ok) == []
    near = {"ratio": RECORDS[5].value["ratio"] * (1 + 1e-7)}
    assert len(check_fields("t", 0, [_row(5, **near)], RECORDS, MAPPING)) == 1
    assert check_fields("t", 0, [_row(5, **near)], RECORDS, MAPPING, Tolerances(float_relative=1e-6)) == []


@pytest.mark.parametrize(("sink", "record", "equal"), [
    (Decimal("12.5"), Decimal("12.50"), True),  # the value, not its written scale
    ("12.50", Decimal("12.50"), True),
    (1250, Decimal("12.50"), False),
    (datetime(2026, 12, 1, 11, 30, tzinfo=UTC), datetime(2026, 12, 1, 10, 30, tzinfo=UTC), False),
    (datetime(2026, 12, 1, 10, 30), datetime(2026, 12, 1, 10, 30, tzinfo=UTC), True),  # naive = UTC
    (1796121000000, datetime(2026, 12, 1, 10, 30, tzinfo=UTC), True),  # epoch ms
    (b"\x00\xff", b"\x00\xff", True), (b"\x00", b"\x01", False), ("\\x00", b"\x00", False),
    ('{"a": 1, "b": [1, 2]}', {"a": 1, "b": [1, 2]}, True),  # a JSON text column
    ({"a": 1}, {"a": 2}, False), ([1, 2], [2, 1], False),
    (None, None, True), (None, 0, False), ("7", 7, True), (True, True, True), (1, True, False),
])
def test_typed_comparison(sink, record, equal):
    assert same(sink, record) is equal


def test_fields_and_defaults_and_shown_values():
    rec = _record(1)
    assert field_of(rec, "key.order_id") == (True, "o-1")
    assert field_of(rec, "amount") == (True, Decimal("1.50"))
    assert field_of(rec, "value.missing") == (False, None)
    assert default_mapping(["id", "amount", "src_offset"], rec) == {"id": "value.id",
                                                                    "amount": "value.amount"}
    assert default_mapping(["order_id", "id"], rec, "order_id") == {"id": "value.id",
                                                                    "order_id": "key.order_id"}
    assert default_mapping(["k"], Fields("o-1", {"a": 1}), "k") == {"k": "key"}
    assert field_of(Fields("o-1", {"a": 1}), "key") == (True, "o-1")
    assert shown("x" * 100) == "'" + "x" * 79 + "… (22 more characters)"
    assert shown("\x1b[2J") == "'\\x1b[2J'"
